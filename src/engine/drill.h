/* drill.h: the faults and quirks a test or a drill flag plants in one
 * rank's run: a non-finite gradient (Z-PREC-006), a perturbed master
 * element (`zinc compare --fault`, Z-REP-001) and a layer whose forward runs
 * twice (`zinc train --test-repeat-layer`, the stage-3 deadlock of
 * Z-SIM-006). They reach the step only through its hooks (ZnStepHooks in
 * engine.h), as a PyTorch user's module hooks would: the step itself holds
 * no test's code. */
#ifndef ZN_DRILL_H
#define ZN_DRILL_H
#include "engine/engine.h"

typedef struct {
    /* at these optimizer steps (1-based), in the first micro-step, the
       gradient's first element of the last module becomes inject_value */
    const long *inject_steps;
    int ninject;
    float inject_value;
    /* after optimizer step fault_step (1-based; 0: off), master element
       fault_index of this rank's partition gets fault_delta added, and the
       working copy follows as if the step had made it */
    long fault_step, fault_index;
    float fault_delta;
    /* with repeat_on, the first forward of layer repeat_layer runs twice
       (an extra stage-3 gather on this rank only) */
    int repeat_on, repeat_layer;
} ZnDrill;

/* The step hooks that plant d's faults (d outlives the engine and is
 * changed by it: the repeat happens once); none planted: no hooks at all. */
ZnStepHooks zn_drill_hooks(ZnDrill *d);
#endif
