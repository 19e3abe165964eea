// libhpcml_cuda_timeline.so: a device timeline for any CUDA program, where
// there is no Nsight Systems (the GPU machines lent to this project have
// none). A CUDA injection library: the driver loads it into the process
// named by CUDA_INJECTION64_PATH at cuInit, and it records, with CUPTI's
// activity API, the start and end on the device of every kernel, copy and
// set, and the moments the program calls cuProfilerStart/cuProfilerStop
// (cudaProfilerStart, torch.cuda.profiler.start: the window to look at).
//
//   CUDA_INJECTION64_PATH=.../libhpcml_cuda_timeline.so HPCML_TIMELINE=FILE program...
//
// FILE gets one tab-separated line a record, written as CUPTI hands over
// its buffers: at cuProfilerStop (this library flushes CUPTI there, so a
// program killed later keeps its window) and at exit
// (bench/mpi_trainer/timeline_summary.py reads it):
//   kernel|memcpy|memset  start_ns  end_ns  device  stream  name
//   mark                  ns        ns      0       0       start|stop
//   dropped               0         0       0       0       <records CUPTI dropped>
// A memcpy's name is its direction and bytes ("HtoD 33554432"); a kernel's
// is its demangled name without the argument list. Timestamps are CUPTI's
// (one clock for the device records and the marks). Errors go to stderr
// and leave the program running untraced: a diagnostic never stops a run.
#include <cuda.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

std::mutex g_mu;  // guards g_out: CUPTI's buffer thread and the callbacks write
std::FILE* g_out = nullptr;
CUpti_SubscriberHandle g_subscriber = nullptr;
constexpr std::size_t kBufferBytes = 8u << 20;

bool Check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "hpcml-timeline: %s: %s\n", what, msg != nullptr ? msg : "unknown error");
  return false;
}

// The demangled name up to its argument list ("void ns::K<float>(...)" ->
// "void ns::K<float>"); C names (cuBLAS's) as they are.
std::string KernelName(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  // The argument list is the last balanced "(...)" ("(anonymous namespace)"
  // comes earlier).
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  for (char& c : s) {
    if (c == '\t' || c == '\n') c = ' ';
  }
  return s;
}

const char* CopyKind(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "other";
  }
}

void Write(const char* kind, std::uint64_t start, std::uint64_t end, unsigned device,
           unsigned stream, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out == nullptr) return;
  std::fprintf(g_out, "%s\t%llu\t%llu\t%u\t%u\t%s\n", kind, static_cast<unsigned long long>(start),
               static_cast<unsigned long long>(end), device, stream, name.c_str());
}

void FlushFile() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) std::fflush(g_out);
}

void CUPTIAPI BufferRequested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer,
                              std::size_t, std::size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        Write("kernel", k->start, k->end, k->deviceId, k->streamId, KernelName(k->name));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        Write("memcpy", m->start, m->end, m->deviceId, m->streamId,
              std::string(CopyKind(m->copyKind)) + " " + std::to_string(m->bytes));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        Write("memset", m->start, m->end, m->deviceId, m->streamId, std::to_string(m->bytes));
        break;
      }
      default:
        break;
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    Write("dropped", 0, 0, 0, 0, std::to_string(dropped));
  }
  std::free(buffer);
  FlushFile();
}

// cuProfilerStart marks after it returns, cuProfilerStop before it runs:
// the window holds what ran between the program's two calls. At the stop,
// CUPTI hands over what it holds (as NVIDIA's injection sample does in this
// callback; the program synchronised before stopping, so that is the window).
void CUPTIAPI OnDriverCall(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                           const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  const bool start = id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
  if ((start && info->callbackSite != CUPTI_API_EXIT) ||
      (!start && info->callbackSite != CUPTI_API_ENTER)) {
    return;
  }
  std::uint64_t ts = 0;
  cuptiGetTimestamp(&ts);
  Write("mark", ts, ts, 0, 0, start ? "start" : "stop");
  if (!start) cuptiActivityFlushAll(0);
  FlushFile();
}

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// Called by the CUDA driver once, at cuInit. Returns 1 when tracing.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  if (g_out != nullptr) return 1;  // the driver calls it once; be sure
  const char* path = std::getenv("HPCML_TIMELINE");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "hpcml-timeline: HPCML_TIMELINE is not set: not tracing\n");
    return 0;
  }
  g_out = std::fopen(path, "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "hpcml-timeline: %s: %s: not tracing\n", path, std::strerror(errno));
    return 0;
  }
  bool ok = Check(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                  "cuptiActivityRegisterCallbacks");
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET}) {
    ok = ok && Check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  }
  ok = ok && Check(cuptiSubscribe(&g_subscriber, OnDriverCall, nullptr), "cuptiSubscribe");
  for (CUpti_CallbackId id :
       {CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop}) {
    ok = ok && Check(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                     "cuptiEnableCallback");
  }
  if (!ok) {
    for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}) {
      cuptiActivityDisable(kind);
    }
    std::fclose(g_out);
    g_out = nullptr;
    return 0;
  }
  std::atexit(AtExit);
  // Which CUPTI: a program may have loaded its own (PyTorch) before this one.
  std::uint32_t version = 0;
  cuptiGetVersion(&version);
  std::fprintf(stderr, "hpcml-timeline: tracing into %s (CUPTI API version %u)\n", path, version);
  return 1;
}
