// ImageNet bounding boxes from the annotation XML files, as
// process_bounding_boxes.py computes them (see imagenet.h).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "imagenet_sources.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/strings.h"
#include "slimtorch/datasets/imagenet.h"

namespace slimtorch {
namespace {

// An element of an XML document: its tag and, as ElementTree's .text, the
// character data before its first child (entities decoded).
struct XmlElement {
  std::string tag;
  std::string text;
  bool has_child = false;
};

std::string DecodeEntity(const std::string& name, const std::string& context) {
  if (name == "lt") return "<";
  if (name == "gt") return ">";
  if (name == "amp") return "&";
  if (name == "quot") return "\"";
  if (name == "apos") return "'";
  if (name.size() > 1 && name[0] == '#') {
    const bool hex = name[1] == 'x';
    long v = std::strtol(name.c_str() + (hex ? 2 : 1), nullptr, hex ? 16 : 10);
    SLIM_CHECK(v > 0 && v < 128, context, ": XML character reference '&", name,
               ";' outside ASCII is not supported");
    return std::string(1, static_cast<char>(v));
  }
  SLIM_FAIL(context, ": unknown XML entity '&", name, ";'");
}

// Skips from `pos` past `end_marker`; throws when it is missing.
size_t SkipPast(const std::string& xml, size_t pos, const char* end_marker,
                const std::string& context) {
  size_t end = xml.find(end_marker, pos);
  SLIM_CHECK(end != std::string::npos, context, ": malformed XML (no '",
             end_marker, "')");
  return end + std::char_traits<char>::length(end_marker);
}

// Collects the elements of one document; each method consumes one kind of
// markup at `pos` and returns the position after it.
class XmlScanner {
 public:
  XmlScanner(const std::string& xml, const std::string& context)
      : xml_(xml), context_(context) {}

  std::vector<XmlElement> Scan() {
    size_t pos = 0;
    while (pos < xml_.size()) {
      if (xml_[pos] != '<') {
        pos = Text(pos);
      } else if (xml_.compare(pos, 4, "<!--") == 0) {
        pos = SkipPast(xml_, pos, "-->", context_);
      } else if (xml_.compare(pos, 9, "<![CDATA[") == 0) {
        const size_t end = SkipPast(xml_, pos, "]]>", context_);
        if (TextOpen()) Current().text += xml_.substr(pos + 9, end - pos - 12);
        pos = end;
      } else if (xml_.compare(pos, 2, "<?") == 0) {
        pos = SkipPast(xml_, pos, "?>", context_);
      } else if (xml_.compare(pos, 2, "<!") == 0) {
        pos = SkipPast(xml_, pos, ">", context_);
      } else if (xml_.compare(pos, 2, "</") == 0) {
        pos = EndTag(pos);
      } else {
        pos = StartTag(pos);
      }
    }
    SLIM_CHECK(!elements_.empty(), context_, ": no XML element found");
    SLIM_CHECK(open_.empty(), context_, ": malformed XML (unclosed element '",
               open_.empty() ? "" : Current().tag, "')");
    return std::move(elements_);
  }

 private:
  XmlElement& Current() { return elements_[open_.back()]; }
  // True when character data belongs to the open element's .text.
  bool TextOpen() { return !open_.empty() && !Current().has_child; }

  size_t Text(size_t pos) {
    const size_t next = std::min(xml_.find('<', pos), xml_.size());
    const std::string text = xml_.substr(pos, next - pos);
    if (open_.empty()) {
      SLIM_CHECK(text.find_first_not_of(" \t\r\n") == std::string::npos,
                 context_, ": malformed XML (text outside the root element)");
    } else if (TextOpen()) {
      std::string& out = Current().text;
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '&') {
          out += text[i];
          continue;
        }
        const size_t semi = text.find(';', i);
        SLIM_CHECK(semi != std::string::npos, context_,
                   ": malformed XML (unterminated entity)");
        out += DecodeEntity(text.substr(i + 1, semi - i - 1), context_);
        i = semi;
      }
    }
    return next;
  }

  size_t EndTag(size_t pos) {
    const size_t end = SkipPast(xml_, pos, ">", context_);
    std::string tag = xml_.substr(pos + 2, end - 1 - pos - 2);
    tag.erase(tag.find_last_not_of(" \t\r\n") + 1);
    SLIM_CHECK(!open_.empty() && Current().tag == tag, context_,
               ": malformed XML (unexpected '</", tag, ">')");
    open_.pop_back();
    return end;
  }

  // A start tag; attribute values (skipped) may hold '>' inside quotes.
  size_t StartTag(size_t pos) {
    size_t end = pos + 1;
    char quote = 0;
    while (end < xml_.size() && (quote || xml_[end] != '>')) {
      if (quote && xml_[end] == quote) {
        quote = 0;
      } else if (!quote && (xml_[end] == '"' || xml_[end] == '\'')) {
        quote = xml_[end];
      }
      ++end;
    }
    SLIM_CHECK(end < xml_.size(), context_, ": malformed XML (unclosed tag)");
    XmlElement e;
    e.tag = xml_.substr(pos + 1,
                        xml_.find_first_of(" \t\r\n/>", pos + 1) - pos - 1);
    SLIM_CHECK(!e.tag.empty(), context_, ": malformed XML (empty tag)");
    SLIM_CHECK(!open_.empty() || elements_.empty(), context_,
               ": malformed XML (more than one root element)");
    if (!open_.empty()) Current().has_child = true;
    elements_.push_back(std::move(e));
    if (xml_[end - 1] != '/') open_.push_back(elements_.size() - 1);
    return end + 1;
  }

  const std::string& xml_;
  const std::string& context_;
  std::vector<XmlElement> elements_;
  std::vector<size_t> open_;  // indices into elements_ of unclosed elements
};

// The elements of `xml` in document order. Enough XML for the ImageNet
// annotation files: elements, attributes (skipped), text, entities,
// comments, processing instructions, CDATA and DOCTYPE.
std::vector<XmlElement> ParseXmlElements(const std::string& xml,
                                         const std::string& context) {
  return XmlScanner(xml, context).Scan();
}

// process_bounding_boxes.GetItem: the text of the index-th element named
// `tag` in document order, or nullopt where upstream gets its -1.
std::optional<std::string> GetItem(const std::vector<XmlElement>& elements,
                                   const std::string& tag, int index = 0) {
  int count = 0;
  for (const XmlElement& e : elements) {
    if (e.tag != tag) continue;
    if (count++ == index) return e.text;
  }
  return std::nullopt;
}

// GetInt: Python's int() of the text; -1 when the element is missing.
long long GetInt(const std::vector<XmlElement>& elements,
                 const std::string& tag, int index,
                 const std::string& context) {
  std::optional<std::string> text = GetItem(elements, tag, index);
  if (!text) return -1;
  const std::string s = Trim(*text, kAsciiWhitespace);
  char* end = nullptr;
  long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
  SLIM_CHECK(!s.empty() && end == s.c_str() + s.size(), context, ": <", tag,
             "> #", index + 1, " is '", *text, "', expected an integer");
  return v;
}

// "%.4f" then float(): the round trip through upstream's CSV.
float Round4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  return static_cast<float>(std::strtod(buf, nullptr));
}

std::string BoxLine(const BoundingBox& b) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%.4f,%.4f,%.4f,%.4f", b.xmin, b.ymin, b.xmax,
                b.ymax);
  return buf;
}

}  // namespace

std::vector<BoundingBox> ParseBoundingBoxXml(
    const std::string& xml, const std::string& folder_synset,
    const std::set<std::string>& synsets, const std::string& context,
    BoundingBoxStats* stats) {
  ++stats->xml_files;
  if (!synsets.count(folder_synset)) {
    ++stats->skipped_files;
    return {};
  }
  const std::vector<XmlElement> elements = ParseXmlElements(xml, context);
  int num_boxes = 0;
  while (GetInt(elements, "xmin", num_boxes, context) != -1) ++num_boxes;
  const std::optional<std::string> label = GetItem(elements, "name");
  std::vector<BoundingBox> boxes;
  for (int i = 0; i < num_boxes; ++i) {
    const double xmin = GetInt(elements, "xmin", i, context);
    const double ymin = GetInt(elements, "ymin", i, context);
    const double xmax = GetInt(elements, "xmax", i, context);
    const double ymax = GetInt(elements, "ymax", i, context);
    const double width = GetInt(elements, "width", 0, context);
    const double height = GetInt(elements, "height", 0, context);
    SLIM_CHECK(width != 0 && height != 0, context, ": image size ", width, "x",
               height, " (<width>x<height>) must not be 0");
    // Argument orders as upstream's min/max, so -0.0 and ties agree.
    const double x0 = xmin / width, x1 = xmax / width;
    const double y0 = ymin / height, y1 = ymax / height;
    const double xmin_s = std::min(std::max(std::min(x0, x1), 0.0), 1.0);
    const double xmax_s = std::min(std::max(std::max(x0, x1), 0.0), 1.0);
    const double ymin_s = std::min(std::max(std::min(y0, y1), 0.0), 1.0);
    const double ymax_s = std::min(std::max(std::max(y0, y1), 0.0), 1.0);
    if (label && *label != folder_synset && synsets.count(*label)) {
      ++stats->skipped_boxes;
      continue;
    }
    if (xmin_s >= xmax_s || ymin_s >= ymax_s) {
      ++stats->skipped_boxes;
      continue;
    }
    boxes.push_back(BoundingBox{Round4(ymin_s), Round4(xmin_s), Round4(ymax_s),
                                Round4(xmax_s)});
  }
  stats->saved_boxes += static_cast<int64_t>(boxes.size());
  ++(boxes.empty() ? stats->skipped_files : stats->saved_files);
  return boxes;
}

void AddBoundingBoxXml(const std::string& xml, const std::string& xml_path,
                       const std::set<std::string>& synsets,
                       ImageNetBoxes* boxes, BoundingBoxStats* stats) {
  const std::filesystem::path path(xml_path);
  const std::string folder = path.parent_path().filename().string();
  std::vector<BoundingBox> found =
      ParseBoundingBoxXml(xml, folder, synsets, xml_path, stats);
  if (found.empty()) return;
  std::vector<BoundingBox>& dest = (*boxes)[path.stem().string() + ".JPEG"];
  dest.insert(dest.end(), found.begin(), found.end());
}

void SortImageNetBoxes(ImageNetBoxes* boxes) {
  for (auto& kv : *boxes) {
    std::stable_sort(kv.second.begin(), kv.second.end(),
                     [](const BoundingBox& a, const BoundingBox& b) {
                       return BoxLine(a) < BoxLine(b);
                     });
  }
}

ImageNetBoxes ReadImageNetBoxes(const std::string& source,
                                const std::set<std::string>& synsets,
                                BoundingBoxStats* stats) {
  namespace fs = std::filesystem;
  const bool is_csv =
      source.size() > 4 && source.compare(source.size() - 4, 4, ".csv") == 0;
  if (is_csv) return ParseImageNetBoxesCsv(ReadFileToString(source), source);
  ImageNetBoxes boxes;
  if (fs::is_directory(source)) {
    // process_bounding_boxes.py's glob '<dir>/*/*.xml', in sorted order.
    for (const std::string& path : Glob(JoinPath(source, "*/*.xml"))) {
      AddBoundingBoxXml(ReadFileToString(path), path, synsets, &boxes, stats);
    }
  } else {
    internal::ForEachArchiveFile(
        source, [&](const std::string& member, const std::string& data) {
          if (member.size() > 4 &&
              member.compare(member.size() - 4, 4, ".xml") == 0 &&
              member.find('/') != std::string::npos) {
            AddBoundingBoxXml(data, member, synsets, &boxes, stats);
          }
        });
  }
  SortImageNetBoxes(&boxes);
  return boxes;
}

}  // namespace slimtorch
