/* pickle.c: torch.save's pickles as plain data (spec Z-DSCK-002).
 *
 * The machine of CPython's Lib/pickle.py (_Unpickler), cut down to the
 * opcodes of protocols 2 and 3 plus the protocol-4 framing ones, with no
 * code behind any of them: GLOBAL names a callable (checked against the
 * allow-list below) and REDUCE/NEWOBJ/BUILD record the call instead of
 * making it. Every value lives in the ZnPickle arena, so shared values (the
 * memo's) and cycles free without care. */
#include "io/pickle.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"

/* The globals DeepSpeed's and torch's checkpoint pickles name (seen in
 * DeepSpeed 0.19.8's files; torch/_weights_only_unpickler.py allows the
 * torch ones too). Nothing else is accepted. */
static const char *const ALLOWED[] = {
    "collections OrderedDict",
    "torch._utils _rebuild_tensor_v2",
    "torch._utils _rebuild_parameter",
    "torch._tensor _rebuild_from_type_v2",   /* a tensor of a subclass: stage 3's fp32 partitions */
    "torch Tensor",
    "torch Size",
    "torch FloatStorage",
    "torch HalfStorage",
    "torch BFloat16Storage",
    "torch DoubleStorage",
    "torch LongStorage",
    "torch IntStorage",
    "torch ShortStorage",
    "torch CharStorage",
    "torch ByteStorage",
    "torch BoolStorage",
    "torch float16",    /* dtypes, as values: DeepSpeed's DynamicLossScaler keeps its dtype */
    "torch float32",
    "torch bfloat16",
    "torch float64",
    "deepspeed.runtime.zero.config ZeroStageEnum",
    "deepspeed.runtime.fp16.loss_scaler LossScaler",
    "deepspeed.runtime.fp16.loss_scaler DynamicLossScaler",
    "deepspeed.utils.tensor_fragment fragment_address",
    "deepspeed.checkpoint.constants PARAM_SHAPES",
};

#define MAX_STACK (1 << 20)
#define MAX_MARKS (1 << 16)
#define MAX_MEMO (1 << 24)

typedef struct {
    const unsigned char *p;
    size_t n, at, op_at;     /* op_at: the opcode being run, for messages */
    const char *where;
    ZnPickle *pk;
    ZnPy **stack;
    long sn, scap;
    long *marks;
    long mn, mcap;
    ZnPy **memo;
    long memo_cap, memo_len;   /* memo_len: keys set, MEMOIZE's next key (CPython's len(memo)) */
    ZnErr *err;
} Vm;

static int bad(Vm *m, const char *what) {
    return zn_err(m->err, ZN_E_CORRUPT, "%s: byte %zu: %s", m->where, m->op_at, what);
}

/* A new value in the arena. */
static ZnPy *val(Vm *m, ZnPyKind kind) {
    ZnPickle *pk = m->pk;
    if (pk->n == pk->cap) {
        long cap = pk->cap ? 2 * pk->cap : 64;
        ZnPy **a = zn_realloc(ZN_HOST_IO, pk->all, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        pk->all = a;
        pk->cap = cap;
    }
    ZnPy *v = zn_calloc(ZN_HOST_IO, 1, sizeof *v);
    if (v) {
        v->kind = kind;
        pk->all[pk->n++] = v;
    }
    return v;
}

static int add_item(ZnPy *c, ZnPy *x) {
    if (c->n == c->cap) {
        if (c->cap > (1 << 29)) return -1;   /* no container of a checkpoint holds 2^29 items */
        int cap = c->cap ? 2 * c->cap : 4;
        ZnPy **a = zn_realloc(ZN_HOST_IO, c->item, (size_t)cap * sizeof *a);
        if (!a) return -1;
        c->item = a;
        c->cap = cap;
    }
    c->item[c->n++] = x;
    return 0;
}

static int push(Vm *m, ZnPy *v) {
    if (!v) return zn_nomem(m->err);
    if (m->sn == MAX_STACK) return bad(m, "the stack grows past 2^20 values");
    if (m->sn == m->scap) {
        long cap = m->scap ? 2 * m->scap : 64;
        ZnPy **a = zn_realloc(ZN_HOST_IO, m->stack, (size_t)cap * sizeof *a);
        if (!a) return zn_nomem(m->err);
        m->stack = a;
        m->scap = cap;
    }
    m->stack[m->sn++] = v;
    return 0;
}

/* The values above the last mark: *base the index of the first. */
static int pop_mark(Vm *m, long *base) {
    if (!m->mn) return bad(m, "no MARK to pop to");
    *base = m->marks[--m->mn];
    return 0;
}

static ZnPy *top(Vm *m, long k) { return m->sn > k ? m->stack[m->sn - 1 - k] : NULL; }

/* n bytes of argument after the opcode */
static const unsigned char *take(Vm *m, size_t n) {
    if (m->n - m->at < n) return NULL;
    const unsigned char *q = m->p + m->at;
    m->at += n;
    return q;
}

static uint32_t le32(const unsigned char *q) { return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24; }

/* A string or bytes value of len bytes from the pickle. */
static int text(Vm *m, ZnPyKind kind, size_t len) {
    const unsigned char *q = take(m, len);
    if (!q) return bad(m, "a string runs past the end of the pickle");
    ZnPy *v = val(m, kind);
    if (v && !(v->s = zn_malloc(ZN_HOST_IO, len + 1))) v = NULL;
    if (v) {
        memcpy(v->s, q, len);
        v->s[len] = 0;
        v->len = len;
    }
    return push(m, v);
}

static int integer(Vm *m, long long x) {
    ZnPy *v = val(m, ZN_PY_INT);
    if (v) v->i = x;
    return push(m, v);
}

/* The tuple of the values from stack index base up, which leave the stack. */
static int tuple_from(Vm *m, long base) {
    ZnPy *t = val(m, ZN_PY_TUPLE);
    if (!t) return zn_nomem(m->err);
    for (long k = base; k < m->sn; k++)
        if (add_item(t, m->stack[k])) return zn_nomem(m->err);
    m->sn = base;
    return push(m, t);
}

static int global(Vm *m) {
    /* "module\nname\n" */
    const unsigned char *a = m->p + m->at, *nl1 = memchr(a, '\n', m->n - m->at);
    const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(m->p + m->n - nl1 - 1)) : NULL;
    if (!nl2) return bad(m, "GLOBAL without its two lines");
    const size_t len = (size_t)(nl2 - a);
    m->at += len + 1;
    char name[256];
    if (len >= sizeof name) return bad(m, "a GLOBAL name longer than 255 bytes");
    memcpy(name, a, len);
    name[len] = 0;
    name[nl1 - a] = ' ';
    for (size_t i = 0; i < sizeof ALLOWED / sizeof *ALLOWED; i++)
        if (!strcmp(name, ALLOWED[i])) {
            ZnPy *v = val(m, ZN_PY_GLOBAL);
            if (v && !(v->s = zn_malloc(ZN_HOST_IO, len + 1))) v = NULL;
            if (v) {
                memcpy(v->s, name, len + 1);
                v->len = len;
            }
            return push(m, v);
        }
    for (size_t i = 0; i < len; i++)   /* a hostile name stays one printable line */
        if (name[i] < 0x20 || name[i] > 0x7e) name[i] = '?';
    return zn_err(m->err, ZN_E_CORRUPT,
                  "%s: byte %zu: global '%s' is not one DeepSpeed's checkpoints name; zinc runs no code from a "
                  "checkpoint",
                  m->where, m->op_at, name);
}

/* REDUCE and NEWOBJ: callable(args) recorded, never made; an
 * OrderedDict() is a dict (torch builds every state dict so). */
static int call(Vm *m) {
    ZnPy *args = top(m, 0), *fn = top(m, 1);
    if (!fn || fn->kind != ZN_PY_GLOBAL || args->kind != ZN_PY_TUPLE)
        return bad(m, "a call whose callable is not a global or whose arguments are not a tuple");
    m->sn -= 2;
    if (!strcmp(fn->s, "collections OrderedDict")) {
        ZnPy *d = val(m, ZN_PY_DICT);
        if (!d) return zn_nomem(m->err);
        if (args->n == 1 && args->item[0]->kind == ZN_PY_LIST) {   /* OrderedDict([(k, v), ...]) */
            const ZnPy *l = args->item[0];
            for (int k = 0; k < l->n; k++) {
                const ZnPy *kv = l->item[k];
                if (kv->kind != ZN_PY_TUPLE || kv->n != 2) return bad(m, "OrderedDict from a list that is not of pairs");
                if (add_item(d, kv->item[0]) || add_item(d, kv->item[1])) return zn_nomem(m->err);
            }
        } else if (args->n) {
            return bad(m, "OrderedDict called with arguments torch does not write");
        }
        return push(m, d);
    }
    ZnPy *c = val(m, ZN_PY_CALL);
    if (c && (add_item(c, fn) || add_item(c, args) || add_item(c, NULL))) c = NULL;
    if (c) c->n = 2;   /* item[2] holds BUILD's state once it comes */
    return push(m, c);
}

static int step(Vm *m, int op, ZnPy **root) {
    const unsigned char *q;
    ZnPy *v, *t;
    long base = 0;
    switch (op) {
    case 0x80:   /* PROTO */
        if (!(q = take(m, 1))) return bad(m, "PROTO without its version");
        if (q[0] > 5) return bad(m, "a pickle protocol above 5");
        return 0;
    case 0x95:   /* FRAME: a length hint, nothing to build */
        return take(m, 8) ? 0 : bad(m, "FRAME without its length");
    case '.':    /* STOP */
        if (!(*root = top(m, 0))) return bad(m, "STOP with nothing on the stack");
        return 1;
    case '(':    /* MARK */
        if (m->mn == MAX_MARKS) return bad(m, "more than 2^16 open MARKs");
        if (m->mn == m->mcap) {
            long cap = m->mcap ? 2 * m->mcap : 16;
            long *a = zn_realloc(ZN_HOST_IO, m->marks, (size_t)cap * sizeof *a);
            if (!a) return zn_nomem(m->err);
            m->marks = a;
            m->mcap = cap;
        }
        m->marks[m->mn++] = m->sn;
        return 0;
    case '}': return push(m, val(m, ZN_PY_DICT));
    case ']': return push(m, val(m, ZN_PY_LIST));
    case ')': return push(m, val(m, ZN_PY_TUPLE));
    case 'N': return push(m, val(m, ZN_PY_NONE));
    case 0x88:   /* NEWTRUE */
    case 0x89:   /* NEWFALSE */
        if ((v = val(m, ZN_PY_BOOL))) v->i = op == 0x88;
        return push(m, v);
    case 'J':    /* BININT */
        if (!(q = take(m, 4))) break;
        return integer(m, (int32_t)le32(q));
    case 'K':    /* BININT1 */
        if (!(q = take(m, 1))) break;
        return integer(m, q[0]);
    case 'M':    /* BININT2 */
        if (!(q = take(m, 2))) break;
        return integer(m, q[0] | q[1] << 8);
    case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if (!(q = take(m, 1))) break;
        const size_t nb = q[0];
        if (nb > 8) return bad(m, "an integer wider than 64 bits");
        if (!(q = take(m, nb))) break;
        uint64_t u = 0;
        for (size_t k = 0; k < nb; k++) u |= (uint64_t)q[k] << (8 * k);
        if (nb && nb < 8 && (q[nb - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * nb);   /* sign-extend */
        return integer(m, (long long)u);
    }
    case 'G': {  /* BINFLOAT: big-endian IEEE double */
        if (!(q = take(m, 8))) break;
        uint64_t u = 0;
        for (int k = 0; k < 8; k++) u = u << 8 | q[k];
        if ((v = val(m, ZN_PY_FLOAT))) memcpy(&v->f, &u, sizeof v->f);
        return push(m, v);
    }
    case 'X':    /* BINUNICODE */
    case 'B':    /* BINBYTES */
        if (!(q = take(m, 4))) break;
        return text(m, op == 'X' ? ZN_PY_STR : ZN_PY_BYTES, le32(q));
    case 0x8c:   /* SHORT_BINUNICODE */
    case 'C':    /* SHORT_BINBYTES */
        if (!(q = take(m, 1))) break;
        return text(m, op == 0x8c ? ZN_PY_STR : ZN_PY_BYTES, q[0]);
    case 't':    /* TUPLE */
        if (pop_mark(m, &base)) return m->err->code;
        return tuple_from(m, base);
    case 0x85: case 0x86: case 0x87:   /* TUPLE1..3 */
        if (m->sn < op - 0x84) return bad(m, "TUPLEn with too few values on the stack");
        return tuple_from(m, m->sn - (op - 0x84));
    case 'a':    /* APPEND */
        v = top(m, 0), t = top(m, 1);
        if (!t || t->kind != ZN_PY_LIST) return bad(m, "APPEND to a value that is not a list");
        m->sn--;
        return add_item(t, v) ? zn_nomem(m->err) : 0;
    case 'e':    /* APPENDS */
        if (pop_mark(m, &base)) return m->err->code;
        if (base < 1 || m->stack[base - 1]->kind != ZN_PY_LIST) return bad(m, "APPENDS to a value that is not a list");
        for (long k = base; k < m->sn; k++)
            if (add_item(m->stack[base - 1], m->stack[k])) return zn_nomem(m->err);
        m->sn = base;
        return 0;
    case 's':    /* SETITEM */
        if (m->sn < 3 || (t = top(m, 2))->kind != ZN_PY_DICT) return bad(m, "SETITEM on a value that is not a dict");
        if (add_item(t, top(m, 1)) || add_item(t, top(m, 0))) return zn_nomem(m->err);
        m->sn -= 2;
        return 0;
    case 'u':    /* SETITEMS */
        if (pop_mark(m, &base)) return m->err->code;
        if (base < 1 || m->stack[base - 1]->kind != ZN_PY_DICT || (m->sn - base) % 2)
            return bad(m, "SETITEMS on a value that is not a dict, or with an odd count");
        for (long k = base; k < m->sn; k++)
            if (add_item(m->stack[base - 1], m->stack[k])) return zn_nomem(m->err);
        m->sn = base;
        return 0;
    case 'q':    /* BINPUT */
    case 'r':    /* LONG_BINPUT */
    case 0x94: { /* MEMOIZE: the next free index */
        long key;
        if (op == 0x94) key = -1;
        else if (!(q = take(m, op == 'q' ? 1 : 4))) break;
        else key = op == 'q' ? q[0] : (long)le32(q);
        if (!(v = top(m, 0))) return bad(m, "PUT with nothing on the stack");
        if (key < 0) key = m->memo_len;   /* MEMOIZE */
        if (key >= MAX_MEMO) return bad(m, "a memo index past 2^24");
        if (key >= m->memo_cap) {
            long cap = m->memo_cap ? m->memo_cap : 64;
            while (cap <= key) cap *= 2;
            ZnPy **a = zn_realloc(ZN_HOST_IO, m->memo, (size_t)cap * sizeof *a);
            if (!a) return zn_nomem(m->err);
            memset(a + m->memo_cap, 0, (size_t)(cap - m->memo_cap) * sizeof *a);
            m->memo = a;
            m->memo_cap = cap;
        }
        if (!m->memo[key]) m->memo_len++;
        m->memo[key] = v;
        return 0;
    }
    case 'h':    /* BINGET */
    case 'j': {  /* LONG_BINGET */
        if (!(q = take(m, op == 'h' ? 1 : 4))) break;
        const long key = op == 'h' ? q[0] : (long)le32(q);
        if (key >= m->memo_cap || !m->memo[key]) return bad(m, "GET of a memo index never PUT");
        return push(m, m->memo[key]);
    }
    case 'c': return global(m);   /* GLOBAL */
    case 'R':    /* REDUCE */
    case 0x81:   /* NEWOBJ */
        if (m->sn < 2) return bad(m, "a call with too few values on the stack");
        return call(m);
    case 'b':    /* BUILD: the state of the object below it */
        if (m->sn < 2 || ((t = top(m, 1))->kind != ZN_PY_CALL && t->kind != ZN_PY_DICT))
            return bad(m, "BUILD on a value that is no constructed object");
        if (t->kind == ZN_PY_DICT) {
            t->attrs = top(m, 0);   /* attributes set on an OrderedDict: kept aside, not items */
        } else {
            t->item[2] = top(m, 0);
            t->n = 3;
        }
        m->sn--;
        return 0;
    case 'Q':    /* BINPERSID */
        if (!(t = top(m, 0))) return bad(m, "BINPERSID with nothing on the stack");
        m->sn--;
        v = val(m, ZN_PY_PERSID);
        if (v && add_item(v, t)) v = NULL;
        return push(m, v);
    default: {
        char what[96];
        snprintf(what, sizeof what, "opcode 0x%02x is not one torch.save writes", (unsigned)op);
        return bad(m, what);
    }
    }
    return bad(m, "an opcode's argument runs past the end of the pickle");
}

int zn_pickle_load(const unsigned char *p, size_t n, const char *where, ZnPickle *pk, ZnPy **root, ZnErr *err) {
    memset(pk, 0, sizeof *pk);
    *root = NULL;
    Vm m = {.p = p, .n = n, .where = where, .pk = pk, .err = err};
    int rc = 0;
    while (!rc) {
        if (m.at >= m.n) {
            m.op_at = m.at;
            rc = bad(&m, "the pickle ends without STOP");
            break;
        }
        m.op_at = m.at;
        rc = step(&m, m.p[m.at++], root);
    }
    free(m.stack);
    free(m.marks);
    free(m.memo);
    if (rc == 1) return 0;
    zn_pickle_free(pk);
    *root = NULL;
    return rc;
}

void zn_pickle_free(ZnPickle *pk) {
    for (long i = 0; i < pk->n; i++) {
        free(pk->all[i]->s);
        free(pk->all[i]->item);
        free(pk->all[i]);
    }
    free(pk->all);
    memset(pk, 0, sizeof *pk);
}

const ZnPy *zn_py_get(const ZnPy *d, const char *key) {
    if (!d || d->kind != ZN_PY_DICT) return NULL;
    for (int k = 0; k + 1 < d->n; k += 2)
        if (d->item[k]->kind == ZN_PY_STR && !strcmp(d->item[k]->s, key)) return d->item[k + 1];
    return NULL;
}

/* ------------------------------------------------------------------ repr */

typedef struct {
    char *b;
    size_t cap, n;
} Out;

static void out(Out *o, const char *s) {
    for (; *s && o->n + 1 < o->cap; s++) o->b[o->n++] = *s;
    o->b[o->n] = 0;
}

/* Python's float repr: the shortest digits that read back the same. */
static void float_repr(Out *o, double f) {
    char s[40];
    if (f != f) { out(o, "nan"); return; }
    if (f > 1.7976931348623157e308) { out(o, "inf"); return; }
    if (f < -1.7976931348623157e308) { out(o, "-inf"); return; }
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, f);
        if (strtod(s, NULL) == f) break;
    }
    out(o, s);
    if (!strpbrk(s, ".en")) out(o, ".0");
}

/* Every call that does not return at once writes a byte, and loops stop
 * when the buffer is full: the work is bounded by cap, however the memo
 * shares values (a DAG doubling at each level would otherwise print 2^64
 * times, as a fuzzer found). */
static int full(const Out *o) { return o->n + 1 >= o->cap; }

static void repr(Out *o, const ZnPy *v, int depth) {
    char s[48];
    if (full(o)) return;
    if (!v) { out(o, "<null>"); return; }
    if (depth > 64) { out(o, "..."); return; }
    switch (v->kind) {
    case ZN_PY_NONE: out(o, "None"); return;
    case ZN_PY_BOOL: out(o, v->i ? "True" : "False"); return;
    case ZN_PY_INT: snprintf(s, sizeof s, "%lld", v->i); out(o, s); return;
    case ZN_PY_FLOAT: float_repr(o, v->f); return;
    case ZN_PY_STR:
    case ZN_PY_BYTES:
        out(o, v->kind == ZN_PY_BYTES ? "b'" : "'");
        for (size_t k = 0; k < v->len && !full(o); k++) {
            const unsigned char c = (unsigned char)v->s[k];
            if (c == '\'' || c == '\\') snprintf(s, sizeof s, "\\%c", c);
            else if (c == '\t' || c == '\n' || c == '\r') snprintf(s, sizeof s, "\\%c", c == '\t' ? 't' : c == '\n' ? 'n' : 'r');
            else if (c < 0x20 || c == 0x7f || (v->kind == ZN_PY_BYTES && c > 0x7f)) snprintf(s, sizeof s, "\\x%02x", c);
            else snprintf(s, sizeof s, "%c", c);
            out(o, s);
        }
        out(o, "'");
        return;
    case ZN_PY_GLOBAL: out(o, v->s); return;
    case ZN_PY_PERSID: out(o, "persid("); repr(o, v->item[0], depth + 1); out(o, ")"); return;
    case ZN_PY_CALL:
        repr(o, v->item[0], depth + 1);
        repr(o, v->item[1], depth + 1);
        if (v->n == 3) { out(o, ".__setstate__("); repr(o, v->item[2], depth + 1); out(o, ")"); }
        return;
    case ZN_PY_LIST:
    case ZN_PY_TUPLE:
    case ZN_PY_DICT: {
        const int dict = v->kind == ZN_PY_DICT;
        out(o, dict ? "{" : v->kind == ZN_PY_LIST ? "[" : "(");
        for (int k = 0; k < v->n && !full(o); k++) {
            if (k) out(o, dict && k % 2 ? ": " : ", ");
            repr(o, v->item[k], depth + 1);
        }
        if (v->kind == ZN_PY_TUPLE && v->n == 1) out(o, ",");
        out(o, dict ? "}" : v->kind == ZN_PY_LIST ? "]" : ")");
        return;
    }
    }
}

char *zn_py_repr(const ZnPy *v, char *buf, size_t cap) {
    Out o = {buf, cap, 0};
    if (cap) buf[0] = 0;
    if (cap) repr(&o, v, 0);
    return buf;
}
