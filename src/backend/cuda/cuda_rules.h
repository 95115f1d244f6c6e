/* cuda_rules.h — the CUDA module's decisions that need no GPU, in plain C (no CUDA or cuDNN
 * header): compiled into libkerac_cuda.so and, alone, into tests/test_cuda_rules.c, so that
 * the error and recovery paths a GPU rarely takes are tested on any machine.
 *   - cuDNN statuses: which mean "this algorithm refuses" (try the next one) and which are
 *     out of memory (recoverable: not remembered, and fit's recovery runs)
 *   - convolution candidates: which one runs in a given workspace, and what the planner is
 *     told to reserve
 *   - KERAC_CUDNN_BENCHMARK: which convolution shape is measured (once, at the batch size
 *     that was planned last for its geometry)
 *   - the bounded cache of convolution shapes: which entry goes
 *   - the input feed: which uploads must first wait for the compute stream */
#ifndef KC_CUDA_RULES_H
#define KC_CUDA_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kerac_backend.h"

/* ---- cuDNN 9 statuses (cudnn_graph_v9.h: codes are grouped by thousands, and
 * CUDNN_STATUS_CATEGORY gives the group). cuda_conv.c checks at compile time that these
 * match the header it is built with. */
enum {
    KC_DNN_SUCCESS = 0,
    KC_DNN_SUBLIBRARY_VERSION_MISMATCH = 1002,
    KC_DNN_SUBLIBRARY_LOADING_FAILED = 1008,
    KC_DNN_NOT_SUPPORTED = 3000, /* and its sub-codes 3001..3014 (_SHAPE, _LAYOUT, _PADDING, ...) */
    KC_DNN_INTERNAL_ERROR = 4000,
    KC_DNN_HOST_ALLOCATION_FAILED = 4003,   /* CUDNN_STATUS_ALLOC_FAILED is its deprecated alias */
    KC_DNN_DEVICE_ALLOCATION_FAILED = 4004,
};
#define KC_DNN_CATEGORY(st) ((st) / 1000 * 1000)

/* cuDNN refused the algorithm (any status of the NOT_SUPPORTED group): try the next one. */
bool kc__cu_dnn_refused(int st);
/* A cuDNN status as kerac's: OK; OUT_OF_MEMORY for a failed host or device allocation (it
 * may pass once memory is freed: not remembered, and fit's recovery runs); DEVICE else. */
kc_status kc__cu_dnn_status(int st);

/* ---- convolution candidates of one direction (forward, backward-data, backward-filter) */
#define KC_CU_MAX_CAND 16

typedef struct kc_cu_dir {
    int n;                        /* accepted candidates, best first */
    int algo[KC_CU_MAX_CAND];
    int math[KC_CU_MAX_CAND];     /* cudnnMathType_t */
    size_t ws[KC_CU_MAX_CAND];    /* cuDNN's workspace for it */
    bool refused[KC_CU_MAX_CAND]; /* cuDNN refused it at run time: never tried again */
    bool measured;                /* ranked by timing (KERAC_CUDNN_BENCHMARK), or found unmeasurable */
} kc_cu_dir;

/* The candidate to run with `avail` bytes of workspace: the best-ranked one not refused
 * that fits (*borrow = 0); when none fits (the plan predates a refusal, or a set-up that
 * failed for lack of memory), the one not refused that needs least, and *borrow = its
 * workspace (taken from the allocator for the call). -1 when every candidate was refused. */
int kc__cu_pick(const kc_cu_dir *d, size_t avail, size_t *borrow);

/* The algorithm workspace the planner is told for a direction: the best-ranked candidate
 * not refused; under KERAC_CUDNN_BENCHMARK before measuring, the largest not refused (the
 * measurement then runs every candidate within the plan). 0 when none is left. */
size_t kc__cu_dir_need(const kc_cu_dir *d, bool benchmark);

/* Bytes of a convolution's own workspace slices before cuDNN's: the transposed kernel
 * (kh*kw*c*f floats), and the padded input (n*hp*wp*c floats) when padded; each 256-byte
 * aligned. */
size_t kc__cu_conv_fixed(int n, int c, int f, int kh, int kw, bool padded, int hp, int wp);

/* conv2d_workspace's answer: the fixed slices (off_algo), cuDNN's largest need over the
 * three directions, and 256 bytes of alignment slack. */
size_t kc__cu_conv_total(size_t off_algo, const size_t need[3]);

/* ---- KERAC_CUDNN_BENCHMARK: measure a shape at its first run when benchmarking, not yet
 * measured, and it is the batch size planned last for its geometry (plan stamps: 0 never
 * planned); a short last batch, or an abandoned probe of --batch-size auto, is not. */
bool kc__cu_find_now(bool benchmark, bool measured, uint64_t plan_stamp, uint64_t newest_plan_stamp);

/* ---- the convolution cache: at most KC_CU_CONV_CACHE shapes; when full, the entry used
 * least recently goes (stamps of last use; keep: an index never chosen, -1 for none). */
#define KC_CU_CONV_CACHE 256
int kc__cu_lru_victim(const uint64_t *last_use, int n, int keep);

/* ---- the input feed's destinations already ordered against the compute stream, per slot.
 * The first upload into a destination the slot has not seen waits for every compute
 * operation enqueued so far (the allocator may have recycled the block from memory queued
 * work still reads); a freed block is forgotten, so its next life as a destination waits
 * again. */
#define KC_CU_FEED_MARKS 4
typedef struct kc_cu_feed_marks {
    const void *dst[KC_FEED_SLOTS][KC_CU_FEED_MARKS]; /* newest first */
} kc_cu_feed_marks;

/* True when dst is new to the slot (the upload must wait); records it. */
bool kc__cu_feed_mark(kc_cu_feed_marks *m, int slot, const void *dst);
/* Forget every destination inside [base, base + size) (a block being freed). */
void kc__cu_feed_forget(kc_cu_feed_marks *m, const void *base, size_t size);

#endif /* KC_CUDA_RULES_H */
