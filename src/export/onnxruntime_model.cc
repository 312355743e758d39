#include "slimtorch/export/onnxruntime_model.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

constexpr char kLibraryVariable[] = "SLIMTORCH_ONNXRUNTIME_LIBRARY";

// onnxruntime's C API, declared here from the facts of its public header
// include/onnxruntime/core/session/onnxruntime_c_api.h (release 1.13,
// ORT_API_VERSION 13) so that building needs nothing of onnxruntime. The
// API is a table of function pointers that OrtGetApiBase()->GetApi(version)
// returns; onnxruntime only ever appends entries, so an entry's position is
// fixed for every version that has it. Entries slimtorch does not call are
// padding. Enum parameters are passed as int (C enums of these values are
// int-sized on the platforms slimtorch builds for).
namespace ort {

struct Status;
struct Env;
struct Session;
struct SessionOptions;
struct MemoryInfo;
struct Value;
struct TensorTypeAndShapeInfo;

constexpr uint32_t kApiVersion = 13;  // ORT_API_VERSION of release 1.13
constexpr int kErrorInvalidArgument = 2;  // OrtErrorCode ORT_INVALID_ARGUMENT
constexpr int kLoggingWarning = 2;        // ORT_LOGGING_LEVEL_WARNING
constexpr int kArenaAllocator = 1;        // OrtAllocatorType OrtArenaAllocator
constexpr int kMemTypeDefault = 0;        // OrtMemType OrtMemTypeDefault
constexpr int kFloat = 1;  // ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT

struct Api {
  Status* (*CreateStatus)(int code, const char* message);  // 0
  int (*GetErrorCode)(const Status* status);                // 1
  const char* (*GetErrorMessage)(const Status* status);     // 2
  Status* (*CreateEnv)(int log_level, const char* log_id, Env** out);  // 3
  void* unused_4_to_6[3];
  Status* (*CreateSession)(const Env* env, const char* model_path,
                           const SessionOptions* options,
                           Session** out);  // 7
  void* unused_8;
  Status* (*Run)(Session* session, const void* run_options,
                 const char* const* input_names, const Value* const* inputs,
                 size_t input_count, const char* const* output_names,
                 size_t output_count, Value** outputs);  // 9
  Status* (*CreateSessionOptions)(SessionOptions** out);  // 10
  void* unused_11_to_23[13];
  Status* (*SetIntraOpNumThreads)(SessionOptions* options,
                                  int threads);  // 24
  void* unused_25_to_48[24];
  Status* (*CreateTensorWithDataAsOrtValue)(const MemoryInfo* info, void* data,
                                            size_t bytes, const int64_t* shape,
                                            size_t rank, int element_type,
                                            Value** out);  // 49
  void* unused_50;
  Status* (*GetTensorMutableData)(Value* value, void** out);  // 51
  void* unused_52_to_59[8];
  Status* (*GetTensorElementType)(const TensorTypeAndShapeInfo* info,
                                  int* out);  // 60
  Status* (*GetDimensionsCount)(const TensorTypeAndShapeInfo* info,
                                size_t* out);  // 61
  Status* (*GetDimensions)(const TensorTypeAndShapeInfo* info, int64_t* dims,
                           size_t rank);  // 62
  void* unused_63_to_64[2];
  Status* (*GetTensorTypeAndShape)(const Value* value,
                                   TensorTypeAndShapeInfo** out);  // 65
  void* unused_66_to_68[3];
  Status* (*CreateCpuMemoryInfo)(int allocator_type, int mem_type,
                                 MemoryInfo** out);  // 69
  void* unused_70_to_91[22];
  void (*ReleaseEnv)(Env*);                                        // 92
  void (*ReleaseStatus)(Status*);                                  // 93
  void (*ReleaseMemoryInfo)(MemoryInfo*);                          // 94
  void (*ReleaseSession)(Session*);                                // 95
  void (*ReleaseValue)(Value*);                                    // 96
  void* unused_97_to_98[2];  // ReleaseRunOptions, ReleaseTypeInfo
  void (*ReleaseTensorTypeAndShapeInfo)(TensorTypeAndShapeInfo*);  // 99
  void (*ReleaseSessionOptions)(SessionOptions*);                  // 100
};

// The positions above, checked against the header's order.
constexpr size_t Slot(size_t index) { return index * sizeof(void*); }
static_assert(offsetof(Api, CreateEnv) == Slot(3));
static_assert(offsetof(Api, CreateSession) == Slot(7));
static_assert(offsetof(Api, Run) == Slot(9));
static_assert(offsetof(Api, SetIntraOpNumThreads) == Slot(24));
static_assert(offsetof(Api, CreateTensorWithDataAsOrtValue) == Slot(49));
static_assert(offsetof(Api, GetTensorElementType) == Slot(60));
static_assert(offsetof(Api, GetTensorTypeAndShape) == Slot(65));
static_assert(offsetof(Api, CreateCpuMemoryInfo) == Slot(69));
static_assert(offsetof(Api, ReleaseEnv) == Slot(92));
static_assert(offsetof(Api, ReleaseSessionOptions) == Slot(100));

struct ApiBase {
  const Api* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)();
};
using GetApiBaseFn = const ApiBase* (*)();

}  // namespace ort

// One loaded library with its process-wide environment and CPU memory
// description; never unloaded.
struct Runtime {
  OnnxRuntimeInfo info;
  const ort::Api* api = nullptr;
  ort::Env* env = nullptr;
  ort::MemoryInfo* cpu = nullptr;

  // Throws "<what>: <onnxruntime's message>" when `status` is an error.
  void Check(ort::Status* status, const std::string& what) const {
    if (status == nullptr) return;
    const std::string message = api->GetErrorMessage(status);
    api->ReleaseStatus(status);
    SLIM_FAIL(what, ": ", message);
  }
};

std::string LoaderError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown reason";
}

// The newest C API table the library gives, from slimtorch's version down:
// a library older than 1.13 returns null for 13 and is asked for its own
// version. The entries above are among the table's first hundred, which
// onnxruntime keeps in place for every later version; that older tables
// (before 1.13) hold all of them is likely but untested (only 1.32.0 was).
const ort::Api* GetApi(const ort::ApiBase* base, int* version) {
  for (uint32_t v = ort::kApiVersion; v >= 1; --v) {
    if (const ort::Api* api = base->GetApi(v)) {
      *version = static_cast<int>(v);
      return api;
    }
  }
  return nullptr;
}

// The C API of the library `handle` (loaded from `path`); throws when it is
// not onnxruntime's or its table does not behave as declared above.
void BindApi(void* handle, const std::string& path, Runtime* rt) {
  dlerror();
  auto get_base =
      reinterpret_cast<ort::GetApiBaseFn>(dlsym(handle, "OrtGetApiBase"));
  SLIM_CHECK(get_base != nullptr, path,
             " is not onnxruntime's library: it has no OrtGetApiBase (",
             LoaderError(), ")");
  const ort::ApiBase* base = get_base();
  SLIM_CHECK(base != nullptr && base->GetApi != nullptr, path,
             ": OrtGetApiBase returned no API");
  const char* version = base->GetVersionString();
  rt->info.version = version != nullptr ? version : "unknown";
  rt->api = GetApi(base, &rt->info.api_version);
  SLIM_CHECK(rt->api != nullptr, path, " (onnxruntime ", rt->info.version,
             ") gives no C API version from 1 to ", ort::kApiVersion);
  // A status made and read back through the table: a library whose table
  // is not laid out as declared fails here rather than in a session.
  const char kProbe[] = "slimtorch probe";
  ort::Status* probe =
      rt->api->CreateStatus(ort::kErrorInvalidArgument, kProbe);
  const bool ok = probe != nullptr &&
                  rt->api->GetErrorCode(probe) == ort::kErrorInvalidArgument &&
                  std::strcmp(rt->api->GetErrorMessage(probe), kProbe) == 0;
  if (probe != nullptr) rt->api->ReleaseStatus(probe);
  SLIM_CHECK(ok, path, " (onnxruntime ", rt->info.version,
             "): its C API does not answer as onnxruntime's does");
}

// Loads `candidate` and sets up onnxruntime; null with `*why` set when the
// dynamic loader cannot load it (the next candidate is then tried); throws
// when it loads but is not a usable onnxruntime.
Runtime* Open(const std::string& candidate, std::string* why) {
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    *why = LoaderError();
    return nullptr;
  }
  auto rt = std::make_unique<Runtime>();
  rt->info.library = candidate;
  try {
    BindApi(handle, candidate, rt.get());
  } catch (...) {
    dlclose(handle);  // nothing of it has run yet
    throw;
  }
  const std::string what = "onnxruntime " + rt->info.version + " (" +
                           candidate + ") could not set up";
  rt->Check(rt->api->CreateEnv(ort::kLoggingWarning, "slimtorch", &rt->env),
            what + " its environment");
  rt->Check(rt->api->CreateCpuMemoryInfo(ort::kArenaAllocator,
                                         ort::kMemTypeDefault, &rt->cpu),
            what + " its CPU memory");
  return rt.release();  // lives as long as the process
}

std::string NotLoadedMessage(const std::vector<std::string>& candidates,
                             const std::vector<std::string>& reasons,
                             const std::string& library) {
  std::string m = "cannot load onnxruntime's library: ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    // The loader's reason usually starts with the name already.
    const bool named = reasons[i].compare(0, candidates[i].size(),
                                          candidates[i]) == 0;
    m += (i ? "; " : "") + (named ? "" : candidates[i] + ": ") + reasons[i];
  }
  const char* env = SlimtorchVariable(kLibraryVariable);
  if (library.empty() && env != nullptr && *env != '\0') {
    m += std::string(" (from ") + kLibraryVariable + ")";
  }
  return m + ". Install onnxruntime (PyPI's wheel has it as "
             "site-packages/onnxruntime/capi/libonnxruntime.so.1.*) and give "
             "its path in " + kLibraryVariable +
         " (label_image: --onnxruntime_library), or put its folder on "
         "LD_LIBRARY_PATH";
}

Runtime& LoadRuntime(const std::string& library) {
  static std::mutex mu;
  static std::map<std::string, Runtime*> loaded;
  std::lock_guard<std::mutex> lock(mu);
  const std::vector<std::string> candidates =
      OnnxRuntimeLibraryCandidates(library);
  std::vector<std::string> reasons;
  for (const std::string& c : candidates) {
    auto it = loaded.find(c);
    if (it != loaded.end()) return *it->second;
    std::string why;
    if (Runtime* rt = Open(c, &why)) return *loaded.emplace(c, rt).first->second;
    reasons.push_back(why);
  }
  SLIM_FAIL(NotLoadedMessage(candidates, reasons, library));
}

template <typename T>
using Owned = std::unique_ptr<T, void (*)(T*)>;

}  // namespace

std::vector<std::string> OnnxRuntimeLibraryCandidates(
    const std::string& library) {
  if (!library.empty()) return {library};
  const char* env = SlimtorchVariable(kLibraryVariable);
  if (env != nullptr && *env != '\0') return {env};
  return {"libonnxruntime.so.1", "libonnxruntime.so"};
}

OnnxRuntimeInfo LoadOnnxRuntime(const std::string& library) {
  return LoadRuntime(library).info;
}

struct OnnxRuntimeModel::Impl {
  Runtime* rt = nullptr;
  ort::Session* session = nullptr;
  ~Impl() {
    if (session != nullptr) rt->api->ReleaseSession(session);
  }
};

OnnxRuntimeModel::OnnxRuntimeModel(const std::string& onnx_path,
                                   const OnnxRuntimeOptions& options)
    : impl_(std::make_unique<Impl>()), path_(onnx_path) {
  Runtime& rt = LoadRuntime(options.library_);
  impl_->rt = &rt;
  info_ = rt.info;
  const ort::Api& api = *rt.api;
  const std::string what = "onnxruntime " + info_.version + " cannot read " +
                           onnx_path;
  ort::SessionOptions* raw_options = nullptr;
  rt.Check(api.CreateSessionOptions(&raw_options), what);
  const Owned<ort::SessionOptions> session_options(raw_options,
                                                   api.ReleaseSessionOptions);
  if (options.intra_op_threads_ > 0) {
    rt.Check(api.SetIntraOpNumThreads(session_options.get(),
                                      options.intra_op_threads_),
             what);
  }
  rt.Check(api.CreateSession(rt.env, onnx_path.c_str(), session_options.get(),
                             &impl_->session),
           what);
}

OnnxRuntimeModel::~OnnxRuntimeModel() = default;

torch::Tensor OnnxRuntimeModel::Run(const torch::Tensor& input,
                                    const std::string& input_name,
                                    const std::string& output_name) {
  const Runtime& rt = *impl_->rt;
  const ort::Api& api = *rt.api;
  torch::Tensor x = input.to(torch::kCPU, torch::kFloat).contiguous();
  const std::vector<int64_t> dims(x.sizes().begin(), x.sizes().end());
  const std::string what = StrCat("onnxruntime ", info_.version,
                                  " could not run ", path_, " on input ",
                                  x.sizes());
  ort::Value* raw_in = nullptr;
  rt.Check(api.CreateTensorWithDataAsOrtValue(
               rt.cpu, x.data_ptr<float>(), x.numel() * sizeof(float),
               dims.data(), dims.size(), ort::kFloat, &raw_in),
           what);
  const Owned<ort::Value> in(raw_in, api.ReleaseValue);
  const char* in_name = input_name.c_str();
  const char* out_name = output_name.c_str();
  const ort::Value* inputs[] = {in.get()};
  ort::Value* raw_out = nullptr;
  rt.Check(api.Run(impl_->session, nullptr, &in_name, inputs, 1, &out_name, 1,
                   &raw_out),
           what);
  const Owned<ort::Value> out(raw_out, api.ReleaseValue);

  ort::TensorTypeAndShapeInfo* raw_shape = nullptr;
  rt.Check(api.GetTensorTypeAndShape(out.get(), &raw_shape), what);
  const Owned<ort::TensorTypeAndShapeInfo> shape(
      raw_shape, api.ReleaseTensorTypeAndShapeInfo);
  int type = 0;
  size_t rank = 0;
  rt.Check(api.GetTensorElementType(shape.get(), &type), what);
  SLIM_CHECK(type == ort::kFloat, path_, ": onnxruntime returned a non-float ",
             "output for ", output_name, " (ONNX element type ", type, ")");
  rt.Check(api.GetDimensionsCount(shape.get(), &rank), what);
  std::vector<int64_t> out_dims(rank);
  rt.Check(api.GetDimensions(shape.get(), out_dims.data(), rank), what);
  void* data = nullptr;
  rt.Check(api.GetTensorMutableData(out.get(), &data), what);
  return torch::from_blob(data, out_dims, torch::kFloat).clone();
}

}  // namespace slimtorch
