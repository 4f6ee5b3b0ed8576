/* A native HIP program for hcqsim's tests (tests/test_native_hip.py): HIP's C API through dlopen, so it builds
 * with any C compiler and no HIP headers. Each step prints one line; any HIP error prints "FAIL <step>: <error>"
 * and exits 1. argv[1] (optional): a code object whose kernel `scale` computes out[i] = in[i] * k + i. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
typedef void *hipStream_t, *hipEvent_t, *hipModule_t, *hipFunction_t;
enum { H2D = 1, D2H = 2, D2D = 3 };

static void *hip;
#define FN(ret, name, ...) static ret (*name)(__VA_ARGS__)
FN(hipError_t, hipInit, unsigned);
FN(hipError_t, hipGetDeviceCount, int *);
FN(hipError_t, hipSetDevice, int);
FN(hipError_t, hipMalloc, void **, size_t);
FN(hipError_t, hipFree, void *);
FN(hipError_t, hipMemcpy, void *, const void *, size_t, int);
FN(hipError_t, hipMemset, void *, int, size_t);
FN(hipError_t, hipDeviceSynchronize, void);
FN(hipError_t, hipStreamCreate, hipStream_t *);
FN(hipError_t, hipMemcpyAsync, void *, const void *, size_t, int, hipStream_t);
FN(hipError_t, hipStreamSynchronize, hipStream_t);
FN(hipError_t, hipEventCreate, hipEvent_t *);
FN(hipError_t, hipEventRecord, hipEvent_t, hipStream_t);
FN(hipError_t, hipEventSynchronize, hipEvent_t);
FN(hipError_t, hipEventElapsedTime, float *, hipEvent_t, hipEvent_t);
FN(hipError_t, hipModuleLoadData, hipModule_t *, const void *);
FN(hipError_t, hipModuleGetFunction, hipFunction_t *, hipModule_t, const char *);
FN(hipError_t, hipModuleLaunchKernel, hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
   unsigned, hipStream_t, void **, void **);
FN(const char *, hipGetErrorString, hipError_t);

static void check(hipError_t e, const char *step) {
    if (e != 0) {
        printf("FAIL %s: %s (%d)\n", step, hipGetErrorString ? hipGetErrorString(e) : "?", e);
        fflush(stdout);
        exit(1);
    }
}

static void *sym(const char *name) {
    void *p = dlsym(hip, name);
    if (!p) { printf("FAIL dlsym %s\n", name); exit(1); }
    return p;
}

#define LOADSYM(name) name = (__typeof__(name))sym(#name)

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { printf("FAIL open %s\n", path); exit(1); }
    fseek(f, 0, SEEK_END); *size = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
    void *buf = malloc(*size);
    if (fread(buf, 1, *size, f) != *size) { printf("FAIL read %s\n", path); exit(1); }
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    hip = dlopen("libamdhip64.so.5", RTLD_NOW);
    if (!hip) { printf("FAIL dlopen: %s\n", dlerror()); return 1; }
    LOADSYM(hipGetErrorString); LOADSYM(hipInit); LOADSYM(hipGetDeviceCount); LOADSYM(hipSetDevice);
    LOADSYM(hipMalloc); LOADSYM(hipFree); LOADSYM(hipMemcpy); LOADSYM(hipMemset); LOADSYM(hipDeviceSynchronize);
    LOADSYM(hipStreamCreate); LOADSYM(hipMemcpyAsync); LOADSYM(hipStreamSynchronize); LOADSYM(hipEventCreate);
    LOADSYM(hipEventRecord); LOADSYM(hipEventSynchronize); LOADSYM(hipEventElapsedTime);
    LOADSYM(hipModuleLoadData); LOADSYM(hipModuleGetFunction); LOADSYM(hipModuleLaunchKernel);

    int n = 0;
    check(hipInit(0), "hipInit");
    check(hipGetDeviceCount(&n), "hipGetDeviceCount");
    printf("devices %d\n", n);
    check(hipSetDevice(0), "hipSetDevice");

    enum { N = 1 << 18 };  /* 1 MiB of uint32 */
    uint32_t *host = malloc(N * 4), *back = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++) host[i] = i * 2654435761u;
    void *a, *b;
    check(hipMalloc(&a, N * 4), "hipMalloc");
    check(hipMalloc(&b, N * 4), "hipMalloc");
    check(hipMemcpy(a, host, N * 4, H2D), "hipMemcpy H2D");
    check(hipMemset(b, 0x5a, N * 4), "hipMemset");
    check(hipMemcpy(b, a, N * 2, D2D), "hipMemcpy D2D");  /* the first half of b from a */
    check(hipMemcpy(back, b, N * 4, D2H), "hipMemcpy D2H");
    int bad = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t want = i < N / 2 ? host[i] : 0x5a5a5a5au;
        if (back[i] != want) { if (bad++ < 3) printf("mismatch at %u: %08x, expected %08x\n", i, back[i], want); }
    }
    printf("copies %s\n", bad ? "wrong" : "ok");

    hipStream_t s;
    hipEvent_t e0, e1;
    float ms = -1;
    check(hipStreamCreate(&s), "hipStreamCreate");
    check(hipEventCreate(&e0), "hipEventCreate");
    check(hipEventCreate(&e1), "hipEventCreate");
    memset(back, 0, N * 4);
    check(hipEventRecord(e0, s), "hipEventRecord");
    check(hipMemcpyAsync(b, host, N * 4, H2D, s), "hipMemcpyAsync H2D");
    check(hipMemcpyAsync(back, b, N * 4, D2H, s), "hipMemcpyAsync D2H");
    check(hipEventRecord(e1, s), "hipEventRecord");
    check(hipEventSynchronize(e1), "hipEventSynchronize");
    check(hipEventElapsedTime(&ms, e0, e1), "hipEventElapsedTime");
    printf("stream %s elapsed_ms>=0 %d\n", memcmp(back, host, N * 4) ? "wrong" : "ok", ms >= 0);

    if (argc > 2 && strcmp(argv[2], "hang") == 0) {  /* wait for a value nobody will ever write */
        hipError_t (*wait_value)(hipStream_t, void *, uint32_t, unsigned, uint32_t) = sym("hipStreamWaitValue32");
        uint32_t *flag;
        hipError_t (*host_malloc)(void **, size_t, unsigned) = sym("hipHostMalloc");
        check(host_malloc((void **)&flag, 4096, 0), "hipHostMalloc");
        *flag = 0;
        check(wait_value(s, flag, 1, 0 /* hipStreamWaitValueGte */, 0xFFFFFFFFu), "hipStreamWaitValue32");
        printf("waiting forever\n");
        check(hipStreamSynchronize(s), "hipStreamSynchronize");
        printf("FAIL hang: the wait returned\n");
        return 1;
    }
    if (argc > 1) {
        size_t size;
        void *image = read_file(argv[1], &size);
        hipModule_t mod;
        hipFunction_t fn;
        check(hipModuleLoadData(&mod, image), "hipModuleLoadData");
        check(hipModuleGetFunction(&fn, mod, "scale"), "hipModuleGetFunction");
        uint32_t k = 3;
        void *params[] = {&a, &b, &k};
        if (argc > 2 && strcmp(argv[2], "fault") == 0) {  /* write to an address nothing maps: a VM fault */
            void *nowhere = (void *)(uintptr_t)0x1000;
            void *bad[] = {&a, &nowhere, &k};
            printf("launching a faulting kernel\n");
            hipError_t e = hipModuleLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, s, bad, NULL);
            if (e == 0) e = hipStreamSynchronize(s);
            printf("FAIL fault: %s (%d)\n", hipGetErrorString(e), e);
            return 1;
        }
        check(hipModuleLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, s, params, NULL), "hipModuleLaunchKernel");
        check(hipStreamSynchronize(s), "hipStreamSynchronize");
        check(hipMemcpy(back, b, N * 4, D2H), "hipMemcpy D2H");
        bad = 0;
        for (uint32_t i = 0; i < N; i++)
            if (back[i] != host[i] * k + i) { if (bad++ < 3) printf("kernel mismatch at %u: %08x\n", i, back[i]); }
        printf("kernel %s\n", bad ? "wrong" : "ok");
    }
    if (n > 1) {  /* a peer copy: device 0's buffer into device 1's, then back to the host */
        void *c;
        check(hipSetDevice(1), "hipSetDevice 1");
        check(hipMalloc(&c, N * 4), "hipMalloc on device 1");
        check(hipMemcpy(c, a, N * 4, D2D), "hipMemcpy peer");
        memset(back, 0, N * 4);
        check(hipMemcpy(back, c, N * 4, D2H), "hipMemcpy D2H from device 1");
        printf("peer %s\n", memcmp(back, host, N * 4) ? "wrong" : "ok");
        check(hipFree(c), "hipFree on device 1");
        check(hipSetDevice(0), "hipSetDevice 0");
    }
    check(hipDeviceSynchronize(), "hipDeviceSynchronize");
    check(hipFree(a), "hipFree");
    check(hipFree(b), "hipFree");
    printf("done\n");
    return 0;
}
