#pragma once
// ImageNet (ILSVRC-2012) as TF-Slim's download_and_convert_imagenet.sh and
// build_imagenet_data.py produce it: shards train-NNNNN-of-01024 and
// validation-NNNNN-of-00128 of tf.train.Example records with every key of
// build_imagenet_data (see ImageNetExample in io/example.h), labels 1..1000
// in synset-file order (0 = background), bounding boxes from the
// ILSVRC2012_bbox_train_v2 XML files as process_bounding_boxes.py gives them.
//
// The pieces of the converter are public so that they can be tested one by
// one against their upstream definitions.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/io/example.h"

namespace slimtorch {

inline constexpr int64_t kImageNetTrainSize = 1281167;
inline constexpr int64_t kImageNetValidationSize = 50000;
inline constexpr int64_t kImageNetNumClasses = 1001;  // 1000 + background

// The synset list (imagenet_lsvrc_2015_synsets.txt): one synset per line,
// whitespace stripped; label i+1 is line i. Throws naming `name` on an empty
// line or a repeated synset.
std::vector<std::string> ParseImageNetSynsets(const std::string& data,
                                              const std::string& name);

// imagenet_metadata.txt: "<synset>\t<human-readable name>" per line →
// synset → name. Throws naming `name` and the line on a line that does not
// split into exactly two tab-separated fields (as build_imagenet_data).
std::map<std::string, std::string> ParseImageNetMetadata(
    const std::string& data, const std::string& name);

// imagenet_2012_validation_synset_labels.txt: line i is the synset of
// ImageNetValidationFilename(i). Throws naming `name` on an empty line.
std::vector<std::string> ParseImageNetValidationLabels(const std::string& data,
                                                       const std::string& name);

// "ILSVRC2012_val_00000001.JPEG" for index 0 (preprocess_imagenet_
// validation_data.py's names).
std::string ImageNetValidationFilename(int64_t index);

// labels.txt as imagenet.py's create_readable_names_for_imagenet_labels:
// 0 → "background", i+1 → the metadata name of synsets[i]. Throws naming
// the synset when the metadata lacks it.
std::map<int64_t, std::string> ImageNetLabelNames(
    const std::vector<std::string>& synsets,
    const std::map<std::string, std::string>& metadata);

// Counts of process_bounding_boxes.py's report.
struct BoundingBoxStats {
  int64_t xml_files = 0;
  int64_t skipped_files = 0;  // folder not a challenge synset, or no box kept
  int64_t saved_files = 0;
  int64_t saved_boxes = 0;
  int64_t skipped_boxes = 0;  // another challenge synset's box, or empty
};

// The boxes of one annotation XML file as process_bounding_boxes.py keeps
// them with a synsets file: `folder_synset` is the name of the folder that
// holds the XML. A folder not in `synsets` gives no boxes (file skipped).
// Each <xmin>/<ymin>/<xmax>/<ymax> (integers, matched by index in document
// order) is divided by the first <width>/<height>, min/max-ordered and
// clamped to [0, 1]; a box is dropped when the file's first <name> is
// another challenge synset (a non-synset name, e.g. "Scottish_deerhound",
// keeps it) or when it is empty (min >= max). Coordinates are rounded to
// 4 decimals, as the CSV upstream goes through. Throws naming `context` on
// malformed XML, non-integer values or a zero size.
std::vector<BoundingBox> ParseBoundingBoxXml(
    const std::string& xml, const std::string& folder_synset,
    const std::set<std::string>& synsets, const std::string& context,
    BoundingBoxStats* stats);

// Image basename ("n01440764_10040.JPEG") → its boxes.
using ImageNetBoxes = std::map<std::string, std::vector<BoundingBox>>;

// Adds the boxes of `xml` (the member or file at path `xml_path`, whose
// parent folder names the synset) to *boxes under the image basename taken
// from the XML's file name, as process_bounding_boxes.py.
void AddBoundingBoxXml(const std::string& xml, const std::string& xml_path,
                       const std::set<std::string>& synsets,
                       ImageNetBoxes* boxes, BoundingBoxStats* stats);

// Orders each image's boxes as `sort` orders the lines of
// imagenet_2012_bounding_boxes.csv (their "%.4f" text), which is the order
// build_imagenet_data reads them in.
void SortImageNetBoxes(ImageNetBoxes* boxes);

// Parses imagenet_2012_bounding_boxes.csv ("<file>,<xmin>,<ymin>,<xmax>,
// <ymax>" per line) in file order. Throws naming `name` and the line.
ImageNetBoxes ParseImageNetBoxesCsv(const std::string& data,
                                    const std::string& name);

// Reads the boxes from `source`: a .csv written by process_bounding_boxes.py,
// a folder of <synset>/<image>.xml files, or an archive of them
// (ILSVRC2012_bbox_train_v2.tar.gz). XML boxes are sorted (SortImageNetBoxes).
ImageNetBoxes ReadImageNetBoxes(const std::string& source,
                                const std::set<std::string>& synsets,
                                BoundingBoxStats* stats);

// Python 2's random.seed(seed); random.shuffle(range(n)) — the order
// build_imagenet_data.py (a Python 2 script) writes its records in: index
// i of the result is the original position of record i.
std::vector<int64_t> Python2ShuffledRange(int64_t n, uint32_t seed = 12345);

// numpy.linspace(start, stop, num).astype(int) for num >= 1.
std::vector<int64_t> LinspaceInt(int64_t start, int64_t stop, int num);

// [begin, end) of each shard, as build_imagenet_data.py cuts `n` records
// into `num_threads` thread ranges and each of those into
// num_shards / num_threads shards. Throws unless num_threads divides
// num_shards.
std::vector<std::pair<int64_t, int64_t>> ImageNetShardRanges(int64_t n,
                                                             int num_threads,
                                                             int num_shards);

// "train-00002-of-01024".
std::string ImageNetShardName(const std::string& split, int shard,
                              int num_shards);

}  // namespace slimtorch
