// A CUPTI injection library for timing the kernels of decode steps as they run (docs/performance.md,
// device_run.sh step `trace`): the CUDA driver loads it when CUDA_INJECTION64_PATH names it, it records
// the start and end of every kernel on the GPU (CUPTI's concurrent-kernel activity, kernels of CUDA graphs
// included) and at exit writes them to $INFX_TRACE_OUT as CSV: start_ns, end_ns, stream, graph_id,
// graph_node, grid_x, name (demangled). bench/cuda/trace_summary.py turns that into what each kernel costs
// a step.
//
// ncu runs kernels one at a time, so its durations include every kernel's launch and ramp and none of the
// overlap that programmatic launches give (a kernel starts while the one before it ends); here the kernels
// run as they do in a replayed graph, and a kernel's cost to the step is how much later it ends than the
// kernel before it.
//
// The driver calls InitializeInjection with no argument, and CUPTI's buffer callbacks take no user data:
// the trace lives in one function-local static, never destroyed (the only state of this library, which
// is a tool loaded into a process to observe it, not part of the engine).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start = 0, end = 0;
  uint32_t stream = 0, graph = 0;
  uint64_t node = 0;
  int32_t grid_x = 0;
  std::string name;
};

struct Trace {
  std::mutex mu;
  std::vector<KernelRecord> kernels;
  uint64_t dropped = 0;
};

// Never destroyed: WriteTrace runs from atexit, after the destructors of function-local statics made
// later than its registration (as this one would be, on the first buffer), and the driver may still
// hand over buffers while the process exits.
Trace& TheTrace() {
  static Trace* trace = new Trace;  // NOLINT(cppcoreguidelines-owning-memory): lives until the process ends
  return *trace;
}

std::string Demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : std::string(name);
}

void Check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what, msg != nullptr ? msg : "unknown CUPTI error");
}

constexpr size_t kBufferBytes = size_t{16} << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Trace& t = TheTrace();
  std::vector<KernelRecord> got;
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    got.push_back(KernelRecord{k->start, k->end, k->streamId, k->graphId, k->graphNodeId, k->gridX, Demangle(k->name)});
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  std::free(buffer);
  const std::lock_guard<std::mutex> lock(t.mu);
  t.kernels.insert(t.kernels.end(), got.begin(), got.end());
  t.dropped += dropped;
}

// Names go last and quoted (template arguments hold commas); a quote inside is doubled, as CSV does.
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void WriteTrace() {
  Check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing the activity buffers");
  Trace& t = TheTrace();
  const std::lock_guard<std::mutex> lock(t.mu);
  const char* path = std::getenv("INFX_TRACE_OUT");
  std::FILE* f = std::fopen(path != nullptr ? path : "kernel_trace.csv", "w");
  if (f == nullptr) {
    std::perror("kernel_trace: opening the output");
    return;
  }
  std::fprintf(f, "start_ns,end_ns,stream,graph_id,graph_node,grid_x,name\n");
  for (const KernelRecord& k : t.kernels)
    std::fprintf(f, "%llu,%llu,%u,%u,%llu,%d,%s\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.stream, k.graph, static_cast<unsigned long long>(k.node),
                 k.grid_x, Quoted(k.name).c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels to %s (%llu records dropped)\n", t.kernels.size(),
               path != nullptr ? path : "kernel_trace.csv", static_cast<unsigned long long>(t.dropped));
}

}  // namespace

// Called by the CUDA driver when it initialises (CUDA_INJECTION64_PATH); nonzero: success.
extern "C" int InitializeInjection(void) {
  Check(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), "registering the buffer callbacks");
  Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel activity");
  std::atexit(WriteTrace);
  return 1;
}
