#pragma once
// Reading members of tar archives (.tar, .tar.gz, ...) with libarchive,
// straight into memory: nothing is extracted to disk, so nothing
// half-extracted can be left behind.

#include <map>
#include <string>
#include <vector>

struct archive;  // libarchive's
struct archive_entry;

namespace slimtorch {

// Throws slimtorch::Error "archive '<archive>': entry '<entry>' <why>" when
// the entry, extracted into a folder, would land outside that folder: an
// empty or absolute path, a ".." component, or a symlink/hardlink whose
// target is absolute or climbs out of the folder (`link_target` empty for
// other entries; a symlink target is relative to the entry's own folder, a
// hardlink target to the archive root).
void CheckArchiveEntryPath(const std::string& archive, const std::string& entry,
                           const std::string& link_target = "",
                           bool is_symlink = false);

// CheckArchiveEntryPath for an entry that libarchive has read the header of:
// its path and, for a symlink or hardlink, its target.
void CheckArchiveEntry(const std::string& archive, archive_entry* entry);

// The contents of the entry whose header libarchive's reader `a` has just
// read. An entry whose header claims more than
// ResourceLimits::max_member_bytes (core/resource_limits.h) is refused
// before memory is taken for it, one whose data grows past it (a lying or
// absent size) before it does; a read error names the archive and `name`.
std::string ReadArchiveEntryData(archive* a, archive_entry* entry,
                                 const std::string& archive_path,
                                 const std::string& name);

// Reads the regular-file members named in `wanted` (paths as stored, e.g.
// "cifar-10-batches-bin/data_batch_1.bin"; a leading "./" in the archive is
// ignored) from the archive at `archive_path`, format and compression
// detected by libarchive. Every entry, wanted or not, passes
// CheckArchiveEntryPath. Returns member path → contents.
//
// Throws slimtorch::Error naming the archive (and the entry where there is
// one) when the file cannot be opened, is not an archive, is truncated or
// corrupt, holds an unsafe entry, holds a wanted name as something other
// than a regular file, or lacks a wanted member (all missing ones are
// listed, with the archive's top-level folders as a hint).
std::map<std::string, std::string> ReadArchiveMembers(
    const std::string& archive_path, const std::vector<std::string>& wanted);

}  // namespace slimtorch
