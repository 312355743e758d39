#pragma once
// TensorFlow checkpoints, read and written without TensorFlow.
//
// V2 (tensor bundle): "<prefix>.index", a sorted-string table (sstable.h)
// whose "" entry is a BundleHeaderProto and whose other entries map tensor
// names to BundleEntryProto (dtype, shape, shard, offset, size, masked
// CRC-32C), and "<prefix>.data-NNNNN-of-NNNNN" shards holding the raw
// little-endian row-major bytes. A partitioned variable's entry lists its
// slices, each stored under TensorFlow's "ordered code" key of (name,
// slice). V1: one table "<prefix>" (or shards "<prefix>-NNNNN-of-NNNNN")
// whose "" entry lists every tensor and its slices (SavedTensorSliceMeta)
// and whose other entries hold one slice each, as a TensorProto.
// src/io/proto/tensor_bundle.proto holds the messages. Persisted format.
//
// Tensors are returned as TensorFlow stores them: TensorFlow's names and
// layouts (a conv kernel is [kh, kw, in, out]); mapping them onto a net's
// variables is the caller's business. Supported dtypes: float, double,
// half, bfloat16, int8/16/32/64, uint8, bool. Others (strings, complex,
// resources, ...) are listed with supported = false and skipped by ReadAll.
//
// Files under one prefix only: which checkpoint of a training directory to
// read (its "checkpoint" index) is checkpoint.h's business, as is the
// TfCheckpointReader that takes a directory too.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slimtorch/core/named_tensor.h"

namespace slimtorch {

enum class TfCheckpointFormat { kV1, kV2 };

// The files of one checkpoint.
struct TfCheckpointLocation {
  std::string prefix;  // "dir/model.ckpt-1234"
  TfCheckpointFormat format = TfCheckpointFormat::kV2;
  std::vector<std::string> files;  // V1: the table file(s)
};

// Resolves `path` as TensorFlow resolves a checkpoint path: a V2 prefix, one
// of its files (".index", ".data-...", ".meta"), a V1 file or the prefix of
// V1 shards. nullopt when nothing there is a TensorFlow checkpoint (a
// safetensors file, a missing path, a directory, ...).
std::optional<TfCheckpointLocation> LocateTfCheckpoint(const std::string& path);

struct TfTensorInfo {
  std::string name;
  int tf_dtype = 0;            // TensorFlow's DataType number (DT_FLOAT = 1)
  std::vector<int64_t> shape;  // TensorFlow's layout
  bool supported = false;      // a dtype slimtorch reads
};

// Name of a TensorFlow DataType number ("float", "string", ...).
std::string TfDtypeName(int tf_dtype);
// The LibTorch dtype of a TensorFlow DataType number, if slimtorch reads it.
std::optional<torch::ScalarType> TorchDtypeOf(int tf_dtype);
// The TensorFlow DataType number of a dtype slimtorch writes (throws naming
// tensor `name` for the others).
int TfDtypeOf(torch::ScalarType dtype, const std::string& name);

// Opens the checkpoint at `location` (LocateTfCheckpoint's answer). The
// index / V1 metadata are read and checked at once; tensor bytes are read on
// demand, straight into the returned tensor (V2: one read per tensor from its
// shard, then its CRC; V1: the file is memory-mapped and each slice decoded
// into place). Every error names the file and, where one is involved, the
// tensor. Read-only and usable from several threads at once.
class TfPrefixReader {
 public:
  explicit TfPrefixReader(const TfCheckpointLocation& location);
  ~TfPrefixReader();
  TfPrefixReader(const TfPrefixReader&) = delete;
  TfPrefixReader& operator=(const TfPrefixReader&) = delete;

  TfCheckpointFormat format() const;
  const std::string& prefix() const;
  // Every tensor (slices of partitioned variables as their whole variable),
  // sorted by name as TensorFlow lists them.
  const std::vector<TfTensorInfo>& tensors() const;
  // The tensor named `name`, or nullptr.
  const TfTensorInfo* Find(const std::string& name) const;
  // A CPU tensor holding `name`'s values (a supported dtype; throws
  // otherwise and when the name is absent).
  torch::Tensor Read(const std::string& name) const;
  // The same into `out` (CPU, contiguous, the tensor's dtype and element
  // count; any shape), e.g. a buffer reused across tensors.
  void ReadInto(const std::string& name, const torch::Tensor& out) const;
  // Every supported tensor in name order; the names of the others go to
  // `skipped` when given.
  NamedTensors ReadAll(std::vector<std::string>* skipped = nullptr) const;

 private:
  const TfTensorInfo& Readable(const std::string& name) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `tensors` (TensorFlow names and layouts, supported dtypes, any
// device) as a V2 bundle: "<prefix>.data-00000-of-00001" then
// "<prefix>.index", each through a temporary file and a rename, index last
// (a bundle exists once its index does), so a failure leaves no checkpoint
// under `prefix`. Bytes as TensorFlow's BundleWriter writes them for the same
// tensors. Names must be unique, non-empty and not start with a NUL byte.
void SaveTfCheckpoint(const std::string& prefix, const NamedTensors& tensors);

// TensorFlow's key for a slice of a partitioned variable in a V2 bundle
// (EncodeTensorNameSlice: ordered-code name, rank, then start and length
// per dimension, length -1 for a whole dimension).
std::string TfSliceKey(const std::string& name,
                       const std::vector<std::pair<int64_t, int64_t>>& extents);

}  // namespace slimtorch
