#include "slimtorch/io/example.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "slimtorch/core/error.h"
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

}  // namespace

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
  proto::Example example;
  SLIM_CHECK(example.ParseFromString(serialized), context,
             ": not a valid tf.train.Example (", serialized.size(), " bytes)");
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
