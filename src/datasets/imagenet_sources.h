#pragma once
// Private to the ImageNet converter: where the images of a split are (a
// folder tree, ILSVRC2012_img_train.tar's tar of per-synset tars,
// ILSVRC2012_img_val.tar's flat members) and reading them by offset, so the
// converter visits them in its shuffled order without extracting anything.
// Not installed.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace slimtorch {
namespace internal {

// Calls fn(member path, contents) for each regular file of the archive at
// `archive_path` (any format and compression libarchive reads), in archive
// order, one member in memory at a time. Every entry passes
// CheckArchiveEntryPath. An Error from `fn` or from reading is rethrown
// naming the archive and the member.
void ForEachArchiveFile(
    const std::string& archive_path,
    const std::function<void(const std::string&, const std::string&)>& fn);

// One image of a split.
struct ImageNetImage {
  std::string synset;    // from its folder, its synset tar or the val labels
  std::string basename;  // "n01440764_10026.JPEG"
  std::string file;      // the plain file, or the tar that holds it
  uint64_t offset = 0;   // where its bytes start in `file`
  uint64_t size = 0;     // its byte count
  std::string where;     // "'<file>'" or "archive '<tar>' member '<path>'"
};

// The images of `source` by synset, each synset's sorted by basename. A
// source is a folder of <synset>/*.JPEG, or an uncompressed tar holding
// <synset>.tar members of *.JPEG files (ILSVRC2012_img_train.tar) or
// <synset>/*.JPEG members; both may also hold flat ILSVRC2012_val_*.JPEG
// images, whose synsets come from `flat_labels` (basename → synset; a flat
// image without a label is counted in *unlabeled and left out). As build_imagenet_data's glob
// '<dir>/<synset>/*.JPEG', only names ending in ".JPEG" that do not start
// with '.' count. Throws naming the source (and member) when it cannot be
// read, is a compressed archive, or holds an unsafe member.
std::map<std::string, std::vector<ImageNetImage>> ListImageNetImages(
    const std::string& source,
    const std::map<std::string, std::string>& flat_labels, int64_t* unlabeled);

// The bytes of `image`; throws naming image.where on a short read.
std::string ReadImageNetImage(const ImageNetImage& image);

}  // namespace internal
}  // namespace slimtorch
