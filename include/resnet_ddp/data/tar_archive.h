#pragma once
// Reading files out of a tar archive in place, gzip-compressed (.tar.gz, through zlib) or
// plain: ustar and GNU headers, GNU long names and pax path and size records. Nothing is
// written to disk. Each header's checksum is checked, and the archive is read to its end so
// that gzip's CRC-32 and length check every byte.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rddp::data {

// The regular files named in `names` (paths in the archive; a leading "./" does not count),
// with their bytes. Names the archive does not hold are absent from the result; a later
// member of the same name replaces an earlier one, as extracting would. Throws Error naming
// `path` for a damaged or truncated archive, or one of `names` larger than `max_member_bytes`
// or stored as a link.
std::map<std::string, std::vector<uint8_t>> read_tar_members(
    const std::string& path, const std::vector<std::string>& names, uint64_t max_member_bytes);

// The path of the archive's first entry (a file or a folder), or nothing where `path` is not
// a tar archive, gzip-compressed or plain. Reads only as far as that entry's header.
std::optional<std::string> first_tar_entry(const std::string& path);

}  // namespace rddp::data
