// Session 38 probe: what events around N launches cost on an idle device (the b1 x 4K timing rule).
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
__global__ void k_empty() {}
__global__ void k_dep() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__global__ void __cluster_dims__(4, 1, 1) k_cluster() {}
struct Big { int a[256]; };
__global__ void k_big(Big b) { if (b.a[0] == 12345) printf("x"); }
template <class F> float run(F f, int reps = 300) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < 20 + reps; ++i) {
    cudaEventRecord(a, 0); f(); cudaEventRecord(b, 0); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 20) t.push_back(ms * 1e3f);
  }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main() {
  cudaFree(0);
  auto pdl = [](dim3 g) {
    cudaLaunchAttribute at; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c = {}; c.gridDim = g; c.blockDim = dim3(32); c.stream = 0; c.attrs = &at; c.numAttrs = 1;
    cudaLaunchKernelEx(&c, k_dep);
  };
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  k_empty<<<1, 32, 0, s>>>(); k_empty<<<1, 32, 0, s>>>();
  cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&ge, g, 0);
  cudaGraph_t g1; cudaGraphExec_t ge1;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  k_empty<<<1, 32, 0, s>>>();
  cudaStreamEndCapture(s, &g1); cudaGraphInstantiate(&ge1, g1, 0);
  Big big = {};
  for (int round = 0; round < 2; ++round) {
    printf("round %d (us, median of 300, events around the enqueue on an idle device)\n", round);
    printf("  one empty <<<1,32>>>           %6.2f\n", run([] { k_empty<<<1, 32>>>(); }));
    printf("  one empty <<<264,256>>>        %6.2f\n", run([] { k_empty<<<264, 256>>>(); }));
    printf("  two empty                      %6.2f\n", run([] { k_empty<<<1, 32>>>(); k_empty<<<1, 32>>>(); }));
    printf("  empty + PDL dependent (bench)  %6.2f\n", run([&] { k_empty<<<1, 32>>>(); pdl(dim3(1)); }));
    printf("  one cluster-4 <<<64,256>>>     %6.2f\n", run([] { k_cluster<<<64, 256>>>(); }));
    printf("  one 1 KB-param kernel          %6.2f\n", run([&] { k_big<<<1, 32>>>(big); }));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<float> t, t1;
    for (int i = 0; i < 320; ++i) {
      cudaEventRecord(a, s); cudaGraphLaunch(ge, s); cudaEventRecord(b, s); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 20) t.push_back(ms * 1e3f);
      cudaEventRecord(a, s); cudaGraphLaunch(ge1, s); cudaEventRecord(b, s); cudaEventSynchronize(b);
      cudaEventElapsedTime(&ms, a, b); if (i >= 20) t1.push_back(ms * 1e3f);
    }
    std::sort(t.begin(), t.end()); std::sort(t1.begin(), t1.end());
    printf("  graph of two empty             %6.2f\n  graph of one empty             %6.2f\n", t[150], t1[150]);
    auto h0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) k_empty<<<1, 32>>>();
    auto h1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    printf("  host enqueue per <<<>>> (1000 back to back) %.2f us\n", std::chrono::duration<double, std::micro>(h1 - h0).count() / 1000);
  }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
