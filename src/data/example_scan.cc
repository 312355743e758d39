#include "example_scan.h"

#include <cstring>

#include "slimtorch/core/error.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/example.h"

namespace slimtorch {
namespace internal {
namespace {

constexpr int kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

// A cursor over protobuf wire data; any overrun throws kMalformed.
struct Wire {
  const char* p;
  const char* end;

  bool done() const { return p >= end; }

  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) throw Malformed();
      const uint8_t b = static_cast<uint8_t>(*p++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw Malformed();
  }
  std::string_view Len() {
    const uint64_t n = Varint();
    if (n > static_cast<uint64_t>(end - p)) throw Malformed();
    std::string_view v(p, n);
    p += n;
    return v;
  }
  uint32_t Fixed32() {
    if (end - p < 4) throw Malformed();
    uint32_t v;
    std::memcpy(&v, p, 4);  // little-endian hosts only (x86, ARM)
    p += 4;
    return v;
  }
  // Reads a tag: field number and wire type.
  void Tag(uint32_t* field, int* type) {
    const uint64_t tag = Varint();
    *field = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<int>(tag & 7);
    if (*field == 0) throw Malformed();
  }
  void Skip(int type) {
    switch (type) {
      case kVarint: Varint(); return;
      case kFixed64:
        if (end - p < 8) throw Malformed();
        p += 8;
        return;
      case kLen: Len(); return;
      case kFixed32: Fixed32(); return;
      default: throw Malformed();
    }
  }
  struct Malformed {};
};

Wire Over(std::string_view s) { return {s.data(), s.data() + s.size()}; }

// The values of a Feature's list of kind `kind` (1 bytes, 2 float, 3 int64):
// calls fn(Wire* list_value_payload_or_element, int type) per field-1 item.
// Returns false when the Feature holds another kind of list.
template <typename Fn>
bool ForEachListItem(std::string_view feature, uint32_t kind, Fn fn) {
  Wire f = Over(feature);
  bool found = false;
  while (!f.done()) {
    uint32_t field;
    int type;
    f.Tag(&field, &type);
    if (field != kind || type != kLen) {
      f.Skip(type);
      continue;
    }
    found = true;
    Wire list = Over(f.Len());
    while (!list.done()) {
      list.Tag(&field, &type);
      if (field != 1) {
        list.Skip(type);
        continue;
      }
      fn(&list, type);
    }
  }
  return found;
}

// Exactly one bytes value, or false.
bool OneBytes(std::string_view feature, std::string_view* out) {
  int n = 0;
  bool ok = ForEachListItem(feature, 1, [&](Wire* w, int type) {
    if (type != kLen) throw Wire::Malformed();
    *out = w->Len();
    ++n;
  });
  return ok && n == 1;
}

// Exactly one int64 value (packed or not), or false.
bool OneInt64(std::string_view feature, int64_t* out) {
  int n = 0;
  bool ok = ForEachListItem(feature, 3, [&](Wire* w, int type) {
    if (type == kVarint) {
      *out = static_cast<int64_t>(w->Varint());
      ++n;
    } else if (type == kLen) {
      Wire packed = Over(w->Len());
      while (!packed.done()) {
        *out = static_cast<int64_t>(packed.Varint());
        ++n;
      }
    } else {
      throw Wire::Malformed();
    }
  });
  return ok && n == 1;
}

// Writes the float list's values into coordinate `k` of boxes (grown as
// needed); returns how many there were. A list of more than
// max_example_values values is refused before the boxes grow for it.
size_t Floats(std::string_view key, std::string_view feature, int k,
              const std::string& context,
              std::vector<std::array<float, 4>>* boxes) {
  const uint64_t limit = GetResourceLimits().max_example_values;
  size_t n = 0;
  auto reserve = [&](uint64_t more) {
    SLIM_CHECK(n + more <= limit, context, ": feature '", key, "' holds ",
               n + more, " values or more, more than a feature may hold (",
               LimitHint(limit, "values", "SLIMTORCH_MAX_EXAMPLE_VALUES"),
               ")");
    if (boxes->size() < n + more) {
      boxes->resize(n + more, {0.0f, 0.0f, 0.0f, 0.0f});
    }
  };
  auto put = [&](uint32_t bits) {
    std::memcpy(&(*boxes)[n][k], &bits, 4);
    ++n;
  };
  ForEachListItem(feature, 2, [&](Wire* w, int type) {
    if (type == kFixed32) {
      reserve(1);
      put(w->Fixed32());
    } else if (type == kLen) {
      Wire packed = Over(w->Len());
      reserve(static_cast<uint64_t>(packed.end - packed.p) / 4);
      while (!packed.done()) put(packed.Fixed32());
    } else {
      throw Wire::Malformed();
    }
  });
  return n;
}

constexpr const char* kBoxKeys[4] = {
    "image/object/bbox/ymin", "image/object/bbox/xmin",
    "image/object/bbox/ymax", "image/object/bbox/xmax"};

// Calls fn(key, value) for each entry of the Example's features map in wire
// order; `value` is the entry's serialized Feature.
template <typename Fn>
void ForEachFeature(std::string_view data, Fn fn) {
  Wire example = Over(data);
  while (!example.done()) {
    uint32_t field;
    int type;
    example.Tag(&field, &type);
    if (field != 1 || type != kLen) {
      example.Skip(type);
      continue;
    }
    Wire features = Over(example.Len());
    while (!features.done()) {
      features.Tag(&field, &type);
      if (field != 1 || type != kLen) {
        features.Skip(type);
        continue;
      }
      Wire entry = Over(features.Len());
      std::string_view key, value;
      while (!entry.done()) {
        entry.Tag(&field, &type);
        if (field == 1 && type == kLen) {
          key = entry.Len();
        } else if (field == 2 && type == kLen) {
          value = entry.Len();
        } else {
          entry.Skip(type);
        }
      }
      fn(key, value);
    }
  }
}

// What the walk over the features found besides what goes straight into
// the ExampleScan: the features read after the walk, the box list lengths.
struct FoundFeatures {
  std::string_view encoded_feature, label_feature;
  bool has_encoded = false, has_label = false;
  size_t box_counts[4] = {0, 0, 0, 0};
};

void TakeFeature(std::string_view key, std::string_view value,
                 const std::string& context, FoundFeatures* found,
                 ExampleScan* out) {
  namespace keys = example_keys;
  if (key == keys::kEncoded) {
    found->encoded_feature = value;
    found->has_encoded = true;
  } else if (key == keys::kLabel) {
    found->label_feature = value;
    found->has_label = true;
  } else if (key == keys::kFormat) {
    std::string_view format;
    if (OneBytes(value, &format)) out->format = format;
  } else if (key == keys::kHeight || key == keys::kWidth) {
    int64_t v = 0;
    SLIM_CHECK(OneInt64(value, &v), context, ": feature '", key,
               "' must hold exactly one int64");
    (key == keys::kHeight ? out->height : out->width) = v;
  } else {
    for (int k = 0; k < 4; ++k) {
      if (key == kBoxKeys[k]) {
        found->box_counts[k] = Floats(key, value, k, context, &out->boxes);
      }
    }
  }
}

// The image bytes and the label, each required once.
void TakeImageAndLabel(const FoundFeatures& found, const std::string& context,
                       ExampleScan* out) {
  namespace keys = example_keys;
  SLIM_CHECK(found.has_encoded, context, ": Example has no '", keys::kEncoded,
             "' feature");
  SLIM_CHECK(OneBytes(found.encoded_feature, &out->encoded), context,
             ": feature '", keys::kEncoded,
             "' must hold exactly one bytes value");
  SLIM_CHECK(found.has_label, context, ": Example has no '", keys::kLabel,
             "' feature");
  SLIM_CHECK(OneInt64(found.label_feature, &out->label), context,
             ": feature '", keys::kLabel, "' must hold exactly one int64");
}

}  // namespace

void ScanExample(std::string_view data, const std::string& context,
                 ExampleScan* out) {
  FoundFeatures found;
  out->format = {};
  out->height = out->width = 0;
  out->boxes.clear();
  try {
    ForEachFeature(data, [&](std::string_view key, std::string_view value) {
      TakeFeature(key, value, context, &found, out);
    });
    TakeImageAndLabel(found, context, out);
  } catch (const Wire::Malformed&) {
    SLIM_FAIL(context, ": not a valid tf.train.Example (", data.size(),
              " bytes)");
  }
  const size_t* counts = found.box_counts;
  SLIM_CHECK(counts[0] == counts[1] && counts[0] == counts[2] &&
                 counts[0] == counts[3],
             context, ": image/object/bbox/{ymin,xmin,ymax,xmax} have ",
             counts[0], ", ", counts[1], ", ", counts[2], ", ", counts[3],
             " values; expected the same number");
  out->boxes.resize(counts[0]);
}

}  // namespace internal
}  // namespace slimtorch
