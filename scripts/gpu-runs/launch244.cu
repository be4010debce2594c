// v51: what a phase kernel's launch costs under `ep bench`'s timing, by the kernel's shape.
// Standalone (nvcc on the GPU host: `nvcc -O2 -arch=sm_90 launch244.cu -o launch244`): a start
// gate (one thread that sleeps `hold` so the launches behind it queue, then stamps its end), an
// event, the kernel under test, an event; as bench.rs times a phase. Each kernel stamps its first
// and last block starts (%globaltimer). Printed per shape: the events' median span, and the
// medians of gate end -> first block start and first -> last block start.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

typedef unsigned long long u64;
#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e = (x);                                                                  \
        if (e != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

__device__ __forceinline__ u64 gt() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// stamps: [0] gate end, [1] first block start (min), [2] last block start (max)
__global__ void gate(u64 hold_ns, u64* stamps) {
    u64 t0 = gt(), now = t0;
    while (now - t0 < hold_ns) {
        __nanosleep(256);
        now = gt();
    }
    stamps[0] = now;
    stamps[1] = ~0ull;
    stamps[2] = 0;
}

__global__ void empty() {}

__device__ __forceinline__ void stamp(u64* stamps) {
    if (threadIdx.x == 0) {
        u64 t = gt();
        atomicMin(stamps + 1, t);
        atomicMax(stamps + 2, t);
    }
}

__global__ void stamped(u64* stamps) { stamp(stamps); }

extern __shared__ int dyn[];
__global__ void __launch_bounds__(512, 1) stamped_smem(u64* stamps, int touch) {
    stamp(stamps);
    if (touch) dyn[threadIdx.x] = threadIdx.x; // (never: keeps the dynamic smem referenced)
}

struct Big {
    u64 w[40];
};
__global__ void __launch_bounds__(512, 1) stamped_params(u64* stamps, Big b) {
    stamp(stamps);
    if (b.w[39] == 12345) stamps[3] = b.w[0];
}

// A kernel with ~100 KB of code it does not run (as ep_dispatch_single's 115 KB of SASS).
__global__ void __launch_bounds__(512, 1) stamped_code(u64* stamps, float* x, int n) {
    stamp(stamps);
    if (n > 0) {
        float a = x[threadIdx.x];
#pragma unroll
        for (int i = 0; i < 6000; i++) a = a * x[i % 61] + x[(i * 7) % 53];
        x[threadIdx.x] = a;
    }
}

struct Shape {
    const char* name;
    int kind; // 0 empty, 1 stamped, 2 smem, 3 params, 4 code
    int grid, block, smem;
};

int main(int argc, char** argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    u64 hold = argc > 2 ? strtoull(argv[2], 0, 10) : 30000;
    int sms;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs, gate hold %llu ns, %d iterations per shape\n", prop.name, sms, hold, iters);
    CHECK(cudaFuncSetAttribute(stamped_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    u64* stamps;
    CHECK(cudaMalloc(&stamps, 64));
    float* x;
    CHECK(cudaMalloc(&x, 1 << 20));
    CHECK(cudaMemset(x, 0, 1 << 20));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<Shape> shapes = {
        {"empty 1x32", 0, 1, 32, 0},
        {"stamped 1x32", 1, 1, 32, 0},
        {"stamped 1x512", 1, 1, 512, 0},
        {"stamped SMx512", 1, sms, 512, 0},
        {"stamped 2SMx256", 1, 2 * sms, 256, 0},
        {"smem SMx512 0KB", 2, sms, 512, 0},
        {"smem SMx512 60KB", 2, sms, 512, 60 * 1024},
        {"smem SMx512 120KB", 2, sms, 512, 120 * 1024},
        {"smem SMx512 200KB", 2, sms, 512, 200 * 1024},
        {"smem 1x32 60KB", 2, 1, 32, 60 * 1024},
        {"params 320B SMx512", 3, sms, 512, 0},
        {"code ~100KB SMx512", 4, sms, 512, 0},
        {"empty 1x32 (again)", 0, 1, 32, 0},
    };
    Big big = {};
    for (int rep = 0; rep < 2; rep++)
        for (auto& sh : shapes) {
            std::vector<float> span, to_first, spread;
            for (int i = 0; i <= iters; i++) {
                gate<<<1, 1, 0, s>>>(hold, stamps);
                CHECK(cudaEventRecord(a, s));
                switch (sh.kind) {
                case 0: empty<<<sh.grid, sh.block, 0, s>>>(); break;
                case 1: stamped<<<sh.grid, sh.block, 0, s>>>(stamps); break;
                case 2: stamped_smem<<<sh.grid, sh.block, sh.smem, s>>>(stamps, 0); break;
                case 3: stamped_params<<<sh.grid, sh.block, 0, s>>>(stamps, big); break;
                case 4: stamped_code<<<sh.grid, sh.block, 0, s>>>(stamps, x, 0); break;
                }
                CHECK(cudaEventRecord(b, s));
                CHECK(cudaStreamSynchronize(s));
                CHECK(cudaGetLastError());
                float ms;
                CHECK(cudaEventElapsedTime(&ms, a, b));
                u64 h[3];
                CHECK(cudaMemcpy(h, stamps, 24, cudaMemcpyDeviceToHost));
                if (i == 0) continue; // warm-up
                span.push_back(ms * 1000.f);
                if (sh.kind > 0) {
                    to_first.push_back((h[1] - h[0]) / 1000.f);
                    spread.push_back((h[2] - h[1]) / 1000.f);
                }
            }
            auto med = [](std::vector<float> v) {
                if (v.empty()) return -1.f;
                std::sort(v.begin(), v.end());
                return v[v.size() / 2];
            };
            printf("rep %d  %-22s events %6.2f us | gate end -> first block %6.2f us | first -> last block %5.2f us\n",
                   rep, sh.name, med(span), med(to_first), med(spread));
        }
    return 0;
}
