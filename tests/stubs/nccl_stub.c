/* nccl_stub.c — a stand-in libnccl.so.2 for kerac doctor's tests: ncclGetVersion answers
 * 22105 (2.21.5), and the file holds NCCL's start-up banner with the CUDA it claims to be
 * built for, KC_STUB_NCCL_CUDA (a compile definition: "13.0", "12.4"). */
#define EXPORT __attribute__((visibility("default")))

EXPORT const char kc_stub_nccl_banner[] = "NCCL version 2.21.5+cuda" KC_STUB_NCCL_CUDA;

EXPORT int ncclGetVersion(int *version) {
    if (!version) return 4; /* ncclInvalidArgument */
    *version = 22105;
    return 0;
}
