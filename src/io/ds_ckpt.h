/* ds_ckpt.h: a DeepSpeed checkpoint folder (DIR/TAG, or DIR naming TAG in
 * its `latest`), read as DeepSpeed's zero_to_fp32 reads it and checked
 * more than it checks (spec Z-DSCK-004..006). Stages 1-3, fp32 and bf16
 * runs (the optimizer files of a bf16 run are named bf16_zero_pp_rank_...),
 * any world size. Every file is opened without running anything
 * (torch_file.h); tensors stay in their files until a parameter is read. */
#ifndef ZN_DS_CKPT_H
#define ZN_DS_CKPT_H
#include <stdint.h>
#include <stdio.h>
#include "io/torch_file.h"

typedef struct {
    char *name;
    int ndim;
    int64_t shape[ZN_PT_MAX_DIMS];
    uint64_t numel;
    int group;          /* the param_shapes entry (optimizer parameter group) it is listed in */
    uint64_t offset;    /* stages 1-2: into its group's vector over all ranks; stage 3: into every rank's partitions */
} ZnDsParam;

typedef struct {
    char *path;                  /* the tag folder */
    char *tag;                   /* its last component */
    char ds_version[32];
    int stage, world, ngroups;   /* world: the optimizer files held (1 for a universal folder) */
    int universal;               /* ds_to_universal's folder: one file per parameter and state */
    int saved_world;             /* a universal folder's partition_count: the world that saved it */
    int per_param;               /* the layout: 0, stages 1-2's flat groups sliced by rank; 1, stage 3's
                                  * partitions of every parameter (ZN_DS_PER_PARAM[stage]) */
    int bf16_names;              /* the optimizer files are bf16_zero_pp_rank_... */
    ZnPtType module_type;        /* the module's dtype as the model states hold it */
    int nparams;
    ZnDsParam *param;            /* param_shapes, in order */
    int nshared;
    char **shared;               /* nshared pairs: the name, then the parameter it shares */
    int nbuffers;                /* buffer_names */
    int nfrozen;                 /* frozen_param_shapes */
    long long global_steps, global_samples, skipped_steps;
    int dynamic_scale;           /* dynamic_loss_scale */
    double cur_scale;            /* the loss scaler's cur_scale (1 where none is recorded) */
    long long scaler_cur_iter, scaler_last_overflow, scaler_hysteresis;   /* a dynamic scaler's; -1 where absent */
    long long adam_step;         /* the optimizer's step count (group 0's 'step'), -1 where absent */
    long long sched_t;           /* lr_scheduler's last_batch_iteration, or global_steps - 1 where none */
    char lr_scheduler[256];      /* its state's repr, "None" where there is none */
    int nmodel;                  /* model-states files: 1 (stages 1-2) or world (stage 3) */
    ZnPt *model;
    ZnPt *optim;                 /* world optimizer-states files, by rank */
    ZnPtTensor *state[3];        /* [rank * ngroups + group]: the fp32 partitions, then the Adam moments
                                  * exp_avg and exp_avg_sq laid out alike (NULL when the optimizer kept none) */
    uint64_t *group_at;          /* stage 3: ngroups + 1 offsets of each group in a rank's partitions */
    uint64_t *rank_at;           /* stages 1-2: [group * (world + 1) + r], where rank r's slice starts in the group's
                                  * vector (the last rank's is saved without the group's padding) */
} ZnDsCkpt;

/* 1 when path is a DeepSpeed folder: it holds *_optim_states.pt files or
 * is a universal folder (zero/optimizer_state.pt), or its `latest` (or
 * `latest_universal`) names a folder that is. */
int zn_ds_is_folder(const char *path);
/* Opens the folder: every file a layout needs present, each a torch.save
 * file, the layout of every parameter consistent with the partitions'
 * sizes. An error names the file and what is wrong. */
int zn_ds_open(ZnDsCkpt *ck, const char *path, ZnErr *err);
void zn_ds_close(ZnDsCkpt *ck);
enum { ZN_DS_FP32 = 0, ZN_DS_EXP_AVG, ZN_DS_EXP_AVG_SQ };
/* Parameter i's fp32 master (which ZN_DS_FP32) or Adam moment, whole
 * (numel floats), gathered from every rank's partition as zero_to_fp32
 * gathers the master. */
int zn_ds_read_state(const ZnDsCkpt *ck, int which, int i, float *dst, ZnErr *err);
/* Asks the kernel to start reading what zn_ds_read_state(which, i) will
 * read (posix_fadvise WILLNEED): the next parameter's reads overlap this
 * one's writing. */
void zn_ds_prefetch(const ZnDsCkpt *ck, int which, int i);
/* 1 when the folder holds state `which` (a universal folder's files are
 * checked as each is read). */
int zn_ds_has_state(const ZnDsCkpt *ck, int which);
/* The rank whose file holds element k of parameter i. */
int zn_ds_rank_of(const ZnDsCkpt *ck, int i, uint64_t k);
/* The index of a parameter called name (a shared name resolves
 * to the parameter it shares), or -1. */
int zn_ds_find(const ZnDsCkpt *ck, const char *name);
/* `zinc ckpt inspect` on the folder: what it holds, then every file
 * checked (every zip entry's CRC-32, shapes against param_shapes,
 * partitions across ranks, the fp32 masters and Adam moments finite). */
int zn_ds_describe(const ZnDsCkpt *ck, FILE *out, ZnErr *err);
/* zero_to_fp32's state dict written as one safetensors file in dtype (or,
 * with hf, without the shared names, as Hugging Face's save_pretrained
 * leaves tied weights out). *ntensors, *nelements: what was written. */
int zn_ds_consolidate(const ZnDsCkpt *ck, const char *out, ZnDtype dtype, int hf, int *ntensors, long long *nelements,
                      ZnErr *err);

/* `zinc train --resume` from a DeepSpeed folder (DIR/TAG or DIR with its
 * `latest`), into an initialised engine of any world size and stage:
 * collective, as zn_ckpt_load (ds_resume.c). */
struct ZnEngine;
int zn_ds_load(struct ZnEngine *E, const char *path, ZnErr *err);

/* `zinc ckpt to-deepspeed` (ds_write.c): zinc's checkpoint DIR/TAG written
 * as the folder DeepSpeed's save_checkpoint writes for the same run, under
 * out/global_stepN, and out/latest naming it. */
typedef struct {
    int stage, world, ngroups, nfiles;
    long long global_steps;
    char tag[64];
} ZnDsWriteSummary;
int zn_ds_write(const char *in, const char *out, ZnDsWriteSummary *sum, ZnErr *err);

#endif
