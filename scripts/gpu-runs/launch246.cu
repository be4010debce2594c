// v52: what a phase kernel's launch costs when it is queued behind the work before it in ways
// other than `ep bench`'s (an event, then the kernel): no event, a programmatic dependent launch
// (PDL) with and without the kernel before it releasing its dependents, a CUDA graph of the
// kernel alone, and a graph of the kernel before it and the kernel (captured plain and as PDL).
// Standalone (nvcc on the GPU host: `nvcc -O2 -arch=sm_90 launch246.cu -o launch246`). The
// kernel before ("gate", as in launch244.cu: one thread that sleeps `hold` so the launches behind
// it queue) stamps its end; the kernel under test stamps each block's start (%globaltimer) after
// its `griddepcontrol.wait` (a no-op unless launched as PDL) and before it, and its blocks' end.
// Printed per way and shape: the medians of gate end -> first block past the wait, -> last
// block past the wait, -> last block's end, and of gate end -> first block's start (before the
// wait: how early a PDL grid is resident).
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

// stamps: [0] gate end, [1] first block past the wait (min), [2] last block past the wait (max),
// [3] last block end (max), [4] first block start before the wait (min)
// (The stamps are reset first: a PDL grid released here may start before the gate ends.)
__global__ void gate(u64 hold_ns, u64* stamps, int release) {
    stamps[1] = ~0ull;
    stamps[2] = 0;
    stamps[3] = 0;
    stamps[4] = ~0ull;
    __threadfence();
    if (release) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    u64 t0 = gt(), now = t0;
    while (now - t0 < hold_ns) {
        __nanosleep(256);
        now = gt();
    }
    stamps[0] = now;
}

__global__ void __launch_bounds__(512, 1) phase(u64* stamps) {
    if (threadIdx.x == 0) atomicMin(stamps + 4, gt());
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0) {
        u64 t = gt();
        atomicMin(stamps + 1, t);
        atomicMax(stamps + 2, t);
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(stamps + 3, gt());
}

enum Way { EVENT, PLAIN, PDL, PDL_RELEASE, GRAPH_KERNEL, GRAPH_PAIR, GRAPH_PAIR_PDL, WAYS };
static const char* way_name[WAYS] = {
    "event, kernel (bench)", "kernel, no event", "PDL", "PDL, gate releases",
    "event, graph(kernel)", "graph(gate, kernel)", "graph(gate, PDL kernel)"};

static void launch_phase(cudaStream_t s, u64* stamps, int grid, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(512);
    cfg.stream = s;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = pdl ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, phase, stamps));
}

int main(int argc, char** argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    u64 hold = argc > 2 ? strtoull(argv[2], 0, 10) : 30000;
    int sms;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int drv;
    CHECK(cudaDriverGetVersion(&drv));
    printf("# %s, %d SMs, driver API %d, gate hold %llu ns, %d iterations per way and shape\n", prop.name, sms, drv,
           hold, iters);
    u64* stamps;
    CHECK(cudaMalloc(&stamps, 64));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    int grids[2] = {1, sms};
    for (int rep = 0; rep < 2; rep++)
        for (int g = 0; g < 2; g++)
            for (int w = 0; w < WAYS; w++) {
                int grid = grids[g];
                cudaGraphExec_t exec = nullptr;
                if (w >= GRAPH_KERNEL) {
                    cudaGraph_t graph;
                    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                    if (w != GRAPH_KERNEL) gate<<<1, 1, 0, s>>>(hold, stamps, w == GRAPH_PAIR_PDL);
                    launch_phase(s, stamps, grid, w == GRAPH_PAIR_PDL);
                    CHECK(cudaStreamEndCapture(s, &graph));
                    CHECK(cudaGraphInstantiate(&exec, graph, 0));
                    CHECK(cudaGraphUpload(exec, s));
                    CHECK(cudaGraphDestroy(graph));
                }
                std::vector<float> first, last, end, early, span;
                for (int i = 0; i <= iters; i++) {
                    if (w != GRAPH_PAIR && w != GRAPH_PAIR_PDL)
                        gate<<<1, 1, 0, s>>>(hold, stamps, w == PDL_RELEASE);
                    if (w == EVENT || w == GRAPH_KERNEL) CHECK(cudaEventRecord(a, s));
                    if (w >= GRAPH_KERNEL)
                        CHECK(cudaGraphLaunch(exec, s));
                    else
                        launch_phase(s, stamps, grid, w == PDL || w == PDL_RELEASE);
                    CHECK(cudaEventRecord(b, s));
                    CHECK(cudaStreamSynchronize(s));
                    CHECK(cudaGetLastError());
                    u64 h[5];
                    CHECK(cudaMemcpy(h, stamps, 40, cudaMemcpyDeviceToHost));
                    float ms = -1.f;
                    if (w == EVENT || w == GRAPH_KERNEL) CHECK(cudaEventElapsedTime(&ms, a, b));
                    if (i == 0) continue; // warm-up
                    first.push_back((h[1] - h[0]) / 1000.f);
                    last.push_back((h[2] - h[0]) / 1000.f);
                    end.push_back((h[3] - h[0]) / 1000.f);
                    early.push_back(((long long)h[4] - (long long)h[0]) / 1000.f);
                    span.push_back(ms * 1000.f);
                }
                if (exec) CHECK(cudaGraphExecDestroy(exec));
                auto med = [](std::vector<float> v) {
                    std::sort(v.begin(), v.end());
                    return v[v.size() / 2];
                };
                printf("rep %d grid %3d  %-26s gate end -> first past wait %5.2f us, last past wait %5.2f, last end "
                       "%5.2f | first start %6.2f | events %6.2f\n",
                       rep, grid, way_name[w], med(first), med(last), med(end), med(early), med(span));
            }
    return 0;
}
