#include "slimtorch/io/example.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/proto/example.pb.h"

namespace slimtorch {
namespace {

void SetBytes(proto::Features* f, const char* key, const std::string& v) {
  (*f->mutable_feature())[key].mutable_bytes_list()->add_value(v);
}
void SetInt64(proto::Features* f, const char* key, int64_t v) {
  (*f->mutable_feature())[key].mutable_int64_list()->add_value(v);
}

const proto::Feature* Find(const proto::Features& f, const char* key) {
  auto it = f.feature().find(key);
  return it == f.feature().end() ? nullptr : &it->second;
}

int64_t GetInt64(const proto::Features& f, const char* key, bool required,
                 const std::string& context) {
  const proto::Feature* feat = Find(f, key);
  if (feat == nullptr) {
    SLIM_CHECK(!required, context, ": Example has no '", key, "' feature");
    return 0;
  }
  SLIM_CHECK(feat->has_int64_list() && feat->int64_list().value_size() == 1,
             context, ": feature '", key, "' must hold exactly one int64");
  return feat->int64_list().value(0);
}

std::string SerializeDeterministic(const proto::Example& example) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    SLIM_CHECK(example.SerializeToCodedStream(&coded),
               "cannot serialize Example");
  }
  return out;
}

// A cursor over protobuf wire data for CheckValueCounts; a read past the
// end makes ok false (protobuf's parser then names the record malformed).
struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  bool more() const { return ok && p < end; }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok = false;
    return 0;
  }
  Wire Len() {
    const uint64_t n = Varint();
    if (!ok || n > static_cast<uint64_t>(end - p)) {
      ok = false;
      return Wire{end, end};
    }
    Wire inner{p, p + n};
    p += n;
    return inner;
  }
  void Skip(int type) {
    const uint64_t n = type == 0 ? 0 : type == 1 ? 8 : type == 5 ? 4 : 0;
    if (type == 0) {
      Varint();
    } else if (type == 2) {
      Len();
    } else if (n > 0 && n <= static_cast<uint64_t>(end - p)) {
      p += n;
    } else {
      ok = false;
    }
  }
};

// The values in a BytesList / FloatList / Int64List message (`kind` 1, 2,
// 3: its field number in Feature), counted without storing them.
uint64_t CountListValues(Wire list, uint64_t kind) {
  uint64_t n = 0;
  while (list.more()) {
    const uint64_t tag = list.Varint();
    const int type = static_cast<int>(tag & 7);
    if ((tag >> 3) != 1 || type != 2 || kind == 1) {
      if ((tag >> 3) == 1) ++n;
      list.Skip(type);
      continue;
    }
    const Wire packed = list.Len();
    if (kind == 2) {
      n += static_cast<uint64_t>(packed.end - packed.p) / 4;
    } else {  // varints: one value per byte without the continuation bit
      for (const uint8_t* b = packed.p; b < packed.end; ++b) n += *b < 0x80;
    }
  }
  return n;
}

// Refuses an Example with a feature list of more than max_example_values
// values before protobuf allocates for them.
void CheckValueCounts(const std::string& serialized,
                      const std::string& context) {
  const uint64_t limit = GetResourceLimits().max_example_values;
  const auto* data = reinterpret_cast<const uint8_t*>(serialized.data());
  Wire example{data, data + serialized.size()};
  while (example.more()) {
    const uint64_t tag = example.Varint();
    if (tag != (1 << 3 | 2)) {
      example.Skip(static_cast<int>(tag & 7));
      continue;
    }
    Wire features = example.Len();
    while (features.more()) {
      const uint64_t ftag = features.Varint();
      if (ftag != (1 << 3 | 2)) {
        features.Skip(static_cast<int>(ftag & 7));
        continue;
      }
      Wire entry = features.Len();
      std::string key;
      uint64_t values = 0;
      while (entry.more()) {
        const uint64_t etag = entry.Varint();
        if (etag == (1 << 3 | 2)) {
          const Wire k = entry.Len();
          key.assign(reinterpret_cast<const char*>(k.p), k.end - k.p);
        } else if (etag == (2 << 3 | 2)) {
          Wire feature = entry.Len();
          while (feature.more()) {
            const uint64_t t = feature.Varint();
            if ((t & 7) == 2 && (t >> 3) >= 1 && (t >> 3) <= 3) {
              values += CountListValues(feature.Len(), t >> 3);
            } else {
              feature.Skip(static_cast<int>(t & 7));
            }
          }
        } else {
          entry.Skip(static_cast<int>(etag & 7));
        }
      }
      SLIM_CHECK(values <= limit, context, ": feature '", key, "' holds ",
                 values, " values, more than a feature may hold (",
                 LimitHint(limit, "values", "SLIMTORCH_MAX_EXAMPLE_VALUES"),
                 ")");
    }
  }
}

proto::Example ParseExample(const std::string& serialized,
                            const std::string& context) {
  CheckValueCounts(serialized, context);
  proto::Example example;
  SLIM_CHECK(example.ParseFromString(serialized), context,
             ": not a valid tf.train.Example (", serialized.size(), " bytes)");
  return example;
}

// The single bytes value of `key`, or "" when absent.
std::string GetBytes(const proto::Features& f, const char* key,
                     const std::string& context) {
  const proto::Feature* feat = Find(f, key);
  if (feat == nullptr) return "";
  SLIM_CHECK(feat->has_bytes_list() && feat->bytes_list().value_size() == 1,
             context, ": feature '", key,
             "' must hold exactly one bytes value");
  return feat->bytes_list().value(0);
}

// The float list of `key`; empty when absent.
std::vector<float> GetFloats(const proto::Features& f, const char* key,
                             const std::string& context) {
  const proto::Feature* feat = Find(f, key);
  if (feat == nullptr) return {};
  SLIM_CHECK(feat->has_float_list(), context, ": feature '", key,
             "' must be a float list");
  const auto& v = feat->float_list().value();
  return std::vector<float>(v.begin(), v.end());
}

std::vector<BoundingBox> BoxesFromFeatures(const proto::Features& f,
                                           const std::string& context) {
  using namespace imagenet_keys;  // NOLINT
  const std::vector<float> ymin = GetFloats(f, kYmin, context);
  const std::vector<float> xmin = GetFloats(f, kXmin, context);
  const std::vector<float> ymax = GetFloats(f, kYmax, context);
  const std::vector<float> xmax = GetFloats(f, kXmax, context);
  SLIM_CHECK(xmin.size() == ymin.size() && ymax.size() == ymin.size() &&
                 xmax.size() == ymin.size(),
             context, ": bounding box lists differ in length (ymin ",
             ymin.size(), ", xmin ", xmin.size(), ", ymax ", ymax.size(),
             ", xmax ", xmax.size(), ")");
  std::vector<BoundingBox> boxes(ymin.size());
  for (size_t i = 0; i < boxes.size(); ++i) {
    boxes[i] = BoundingBox{ymin[i], xmin[i], ymax[i], xmax[i]};
  }
  return boxes;
}

}  // namespace

struct ExampleBuilder::Impl {
  proto::Example example;
  proto::Feature& At(const std::string& key) {
    proto::Feature& feat =
        (*example.mutable_features()->mutable_feature())[key];
    feat.Clear();
    return feat;
  }
};

ExampleBuilder::ExampleBuilder() : impl_(std::make_unique<Impl>()) {}
ExampleBuilder::~ExampleBuilder() = default;

ExampleBuilder& ExampleBuilder::AddBytes(const std::string& key,
                                         const std::string& value) {
  impl_->At(key).mutable_bytes_list()->add_value(value);
  return *this;
}

ExampleBuilder& ExampleBuilder::AddInt64(const std::string& key,
                                         int64_t value) {
  impl_->At(key).mutable_int64_list()->add_value(value);
  return *this;
}

ExampleBuilder& ExampleBuilder::AddInt64List(
    const std::string& key, const std::vector<int64_t>& values) {
  auto* list = impl_->At(key).mutable_int64_list();
  for (int64_t v : values) list->add_value(v);
  return *this;
}

ExampleBuilder& ExampleBuilder::AddFloatList(const std::string& key,
                                             const std::vector<float>& values) {
  auto* list = impl_->At(key).mutable_float_list();
  for (float v : values) list->add_value(v);
  return *this;
}

std::string ExampleBuilder::Serialize() const {
  return SerializeDeterministic(impl_->example);
}

std::string EncodeImageNetExample(const ImageNetExample& ex) {
  using namespace imagenet_keys;  // NOLINT
  std::vector<float> xmin, ymin, xmax, ymax;
  for (const BoundingBox& b : ex.boxes) {
    xmin.push_back(b.xmin);
    ymin.push_back(b.ymin);
    xmax.push_back(b.xmax);
    ymax.push_back(b.ymax);
  }
  ExampleBuilder builder;
  builder.AddInt64(example_keys::kHeight, ex.height)
      .AddInt64(example_keys::kWidth, ex.width)
      .AddBytes(kColorspace, ex.colorspace)
      .AddInt64(kChannels, ex.channels)
      .AddInt64(example_keys::kLabel, ex.label)
      .AddBytes(kSynset, ex.synset)
      .AddBytes(kText, ex.text)
      .AddFloatList(kXmin, xmin)
      .AddFloatList(kXmax, xmax)
      .AddFloatList(kYmin, ymin)
      .AddFloatList(kYmax, ymax)
      .AddInt64List(kBoxLabel, std::vector<int64_t>(xmin.size(), ex.label))
      .AddBytes(example_keys::kFormat, ex.format)
      .AddBytes(kFilename, ex.filename)
      .AddBytes(example_keys::kEncoded, ex.encoded);
  return builder.Serialize();
}

ImageNetExample DecodeImageNetExample(const std::string& serialized,
                                      const std::string& context) {
  using namespace imagenet_keys;  // NOLINT
  const proto::Example example = ParseExample(serialized, context);
  const proto::Features& f = example.features();
  ImageNetExample ex;
  const proto::Feature* enc = Find(f, example_keys::kEncoded);
  SLIM_CHECK(enc != nullptr, context, ": Example has no '",
             example_keys::kEncoded, "' feature");
  ex.encoded = GetBytes(f, example_keys::kEncoded, context);
  ex.format = GetBytes(f, example_keys::kFormat, context);
  ex.colorspace = GetBytes(f, kColorspace, context);
  ex.channels = GetInt64(f, kChannels, /*required=*/false, context);
  ex.label = GetInt64(f, example_keys::kLabel, /*required=*/true, context);
  ex.synset = GetBytes(f, kSynset, context);
  ex.text = GetBytes(f, kText, context);
  ex.filename = GetBytes(f, kFilename, context);
  ex.height = GetInt64(f, example_keys::kHeight, false, context);
  ex.width = GetInt64(f, example_keys::kWidth, false, context);
  ex.boxes = BoxesFromFeatures(f, context);
  return ex;
}

std::vector<BoundingBox> DecodeBoundingBoxes(const std::string& serialized,
                                             const std::string& context) {
  const proto::Example example = ParseExample(serialized, context);
  return BoxesFromFeatures(example.features(), context);
}

std::string EncodeImageExample(const ImageExample& ex) {
  proto::Example example;
  proto::Features* f = example.mutable_features();
  SetBytes(f, example_keys::kEncoded, ex.encoded);
  SetBytes(f, example_keys::kFormat, ex.format);
  SetInt64(f, example_keys::kLabel, ex.label);
  SetInt64(f, example_keys::kHeight, ex.height);
  SetInt64(f, example_keys::kWidth, ex.width);
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    SLIM_CHECK(example.SerializeToCodedStream(&coded),
               "cannot serialize Example");
  }
  return out;
}

ImageExample DecodeImageExample(const std::string& serialized,
                                const std::string& context,
                                const std::string& default_format) {
  const proto::Example example = ParseExample(serialized, context);
  const proto::Features& f = example.features();
  ImageExample ex;
  const proto::Feature* enc = Find(f, example_keys::kEncoded);
  SLIM_CHECK(enc != nullptr, context, ": Example has no '",
             example_keys::kEncoded, "' feature");
  SLIM_CHECK(enc->has_bytes_list() && enc->bytes_list().value_size() == 1,
             context, ": feature '", example_keys::kEncoded,
             "' must hold exactly one bytes value");
  ex.encoded = enc->bytes_list().value(0);
  const proto::Feature* fmt = Find(f, example_keys::kFormat);
  if (fmt != nullptr && fmt->has_bytes_list() &&
      fmt->bytes_list().value_size() == 1) {
    ex.format = fmt->bytes_list().value(0);
  } else {
    ex.format = default_format;
  }
  ex.label = GetInt64(f, example_keys::kLabel, /*required=*/true, context);
  ex.height = GetInt64(f, example_keys::kHeight, false, context);
  ex.width = GetInt64(f, example_keys::kWidth, false, context);
  return ex;
}

}  // namespace slimtorch
