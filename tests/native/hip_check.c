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

/* hipHostRegister of ordinary heap memory (not page aligned, so its GPU address differs from the CPU's): the
 * kernel writes it through hipHostGetDevicePointer's address, the CPU reads the result in place, and a hipMemcpy
 * from it (HIP's pinned path) gives the same bytes. */
static void register_host_memory(hipFunction_t fn, void *a, const uint32_t *host, uint32_t k, hipStream_t s) {
    enum { N = 1 << 16 };
    hipError_t (*host_register)(void *, size_t, unsigned) = sym("hipHostRegister");
    hipError_t (*host_unregister)(void *) = sym("hipHostUnregister");
    hipError_t (*device_pointer)(void **, void *, unsigned) = sym("hipHostGetDevicePointer");
    char *raw = malloc(N * 4 + 4096 + 64);
    uint32_t *mem = (uint32_t *)(raw + 64);  /* heap memory at an odd offset in its page */
    memset(mem, 0xee, N * 4);
    void *dev = NULL;
    check(host_register(mem, N * 4, 0), "hipHostRegister");
    check(device_pointer(&dev, mem, 0), "hipHostGetDevicePointer");
    printf("registered gpu address %s\n", dev == (void *)mem ? "same" : "differs");
    void *params[] = {&a, &dev, &k};
    check(hipModuleLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, s, params, NULL), "hipModuleLaunchKernel register");
    check(hipStreamSynchronize(s), "hipStreamSynchronize register");
    int bad = 0;
    for (uint32_t i = 0; i < N; i++)
        if (mem[i] != host[i] * k + i) { if (bad++ < 3) printf("registered mismatch at %u: %08x\n", i, mem[i]); }
    uint32_t *back = calloc(N, 4);
    void *d;
    check(hipMalloc(&d, N * 4), "hipMalloc register");
    check(hipMemcpy(d, mem, N * 4, H2D), "hipMemcpy H2D from registered");
    memset(back, 0, N * 4);
    check(hipMemcpy(back, d, N * 4, D2H), "hipMemcpy D2H register");
    if (memcmp(back, mem, N * 4)) bad++;
    check(hipFree(d), "hipFree register");
    check(host_unregister(mem), "hipHostUnregister");
    printf("registered %s\n", bad ? "wrong" : "ok");
    free(back);
    free(raw);
}

/* hipMallocManaged (with SVM: KFD's SVM SET_ATTR / GET_ATTR): the CPU fills it in place, hipMemAdvise and
 * hipMemPrefetchAsync advise and move it, a kernel reads it and writes a second managed buffer, the CPU reads that
 * in place, and hipMemRangeGetAttribute reports the advice back (without SVM HIP cannot: it says so). */
static void managed_memory(hipFunction_t fn, uint32_t k, hipStream_t s) {
    enum { N = 1 << 16 };
    hipError_t (*malloc_managed)(void **, size_t, unsigned) = sym("hipMallocManaged");
    hipError_t (*advise)(const void *, size_t, int, int) = sym("hipMemAdvise");
    hipError_t (*prefetch)(const void *, size_t, int, hipStream_t) = sym("hipMemPrefetchAsync");
    hipError_t (*range_attribute)(void *, size_t, int, const void *, size_t) = sym("hipMemRangeGetAttribute");
    uint32_t *in = NULL, *out = NULL;
    check(malloc_managed((void **)&in, N * 4, 1 /* hipMemAttachGlobal */), "hipMallocManaged");
    check(malloc_managed((void **)&out, N * 4, 1), "hipMallocManaged");
    for (uint32_t i = 0; i < N; i++) { in[i] = i * 7u + 1; out[i] = 0xdeadbeef; }
    check(advise(in, N * 4, 3 /* hipMemAdviseSetPreferredLocation */, 0), "hipMemAdvise");
    check(prefetch(in, N * 4, 0, s), "hipMemPrefetchAsync");
    void *params[] = {&in, &out, &k};
    check(hipModuleLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, s, params, NULL), "hipModuleLaunchKernel managed");
    check(hipStreamSynchronize(s), "hipStreamSynchronize managed");
    int bad = 0;
    for (uint32_t i = 0; i < N; i++)
        if (out[i] != in[i] * k + i) { if (bad++ < 3) printf("managed mismatch at %u: %08x\n", i, out[i]); }
    printf("managed %s\n", bad ? "wrong" : "ok");
    int preferred = -5, prefetched = -5;  /* HIP answers these from the SVM attributes (KFD's GET_ATTR) */
    hipError_t e = range_attribute(&preferred, sizeof preferred, 2 /* hipMemRangeAttributePreferredLocation */, in,
                                   N * 4);
    if (e == 0)
        e = range_attribute(&prefetched, sizeof prefetched, 4 /* hipMemRangeAttributeLastPrefetchLocation */, in,
                            N * 4);
    if (e == 0)
        printf("managed attributes preferred %d prefetched %d\n", preferred, prefetched);
    else
        printf("managed attributes unavailable: %s\n", hipGetErrorString(e));
    check(hipFree(in), "hipFree managed");
    check(hipFree(out), "hipFree managed");
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

    {   /* pageable copies beyond 4 MiB: ROCr 6.1 with SVM sends each as one COPY_LINEAR on gfx942 */
        size_t big = (12 << 20) + 24;
        unsigned char *hb = malloc(big), *hb2 = calloc(big, 1);
        for (size_t i = 0; i < big; i++) hb[i] = (unsigned char)(i * 131 + (i >> 12));
        void *db;
        check(hipMalloc(&db, big), "hipMalloc big");
        check(hipMemcpy(db, hb, big, H2D), "hipMemcpy H2D big");
        check(hipMemcpy(hb2, db, big, D2H), "hipMemcpy D2H big");
        printf("big copies %s\n", memcmp(hb, hb2, big) ? "wrong" : "ok");
        check(hipFree(db), "hipFree big");
        free(hb);
        free(hb2);
    }

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
        register_host_memory(fn, a, host, k, s);
        managed_memory(fn, k, s);
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
