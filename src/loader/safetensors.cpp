// loader/safetensors.cpp — reading and writing the safetensors format.
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"<tensor>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {..}}
// then the data region; data_offsets are relative to the data region's start. The header is untrusted
// input: every field is checked before any pointer into the mapping is formed.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <string>

#include "loader/checkpoint.h"
#include "loader/json_fields.h"

namespace helium {

using loader_detail::json_error_text;
using loader_detail::quote;
using nlohmann::json;

namespace {

// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file, and
// checking it first keeps a bad length from making us parse (or allocate for) gigabytes of "JSON".
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kLengthBytes = 8;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A JSON value for a message: numbers as written, anything else by its type (never a whole subtree).
std::string describe(const json& v) {
  return v.is_number() ? v.dump() : std::string(v.type_name());
}

std::string supported_dtypes() {
  std::string s;
  for (const auto& info : kDTypeTable) s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

// One header entry into `out`; `where` is "<file>: tensor '<name>'".
Status parse_entry(const std::string& where, const json& entry, SafetensorsTensor& out) {
  if (!entry.is_object()) return Status::error(where + ": entry must be an object, got " + entry.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) return Status::error(where + ": entry has no \"" + key + "\"");

  const json& dtype = entry["dtype"];
  if (!dtype.is_string())
    return Status::error(where + ": \"dtype\" must be a string, got " + dtype.type_name());
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  std::optional<DType> parsed = dtype_from_name(dtype_text);
  if (!parsed)
    return Status::error(where + ": dtype " + quote(dtype_text) +
                         " is not supported (supported: " + supported_dtypes() + ")");
  out.dtype = *parsed;

  const json& shape = entry["shape"];
  if (!shape.is_array())
    return Status::error(where + ": \"shape\" must be an array, got " + shape.type_name());
  out.shape.clear();
  // Element count and byte size with overflow checks: a corrupt shape must not wrap around to a size
  // that happens to match the offsets.
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json& d = shape[i];
    if (!d.is_number_integer())
      return Status::error(where + ": shape[" + std::to_string(i) + "] must be an integer, got " +
                           (d.is_number() ? std::string("a non-integer number") : d.type_name()));
    int64_t dim;
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Status::error(where + ": shape[" + std::to_string(i) + "] = " + std::to_string(u) +
                             " is too large");
      dim = static_cast<int64_t>(u);
    } else {
      dim = d.get<int64_t>();
    }
    if (dim < 0)
      return Status::error(where + ": shape[" + std::to_string(i) + "] = " + std::to_string(dim) +
                           " is negative");
    out.shape.push_back(dim);
    overflow = overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel);
  }
  uint64_t needed_bytes = 0;
  overflow =
      overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_bytes(out.dtype)), &needed_bytes);

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    return Status::error(where + ": \"data_offsets\" must be an array of two integers, got " +
                         (offsets.is_array() ? "an array of " + std::to_string(offsets.size())
                                             : std::string(offsets.type_name())));
  for (size_t i = 0; i < 2; ++i) {
    if (!offsets[i].is_number_unsigned())
      return Status::error(where + ": data_offsets[" + std::to_string(i) +
                           "] must be a non-negative integer, got " + describe(offsets[i]));
  }
  out.begin = offsets[0].get<uint64_t>();
  out.end = offsets[1].get<uint64_t>();
  if (out.begin > out.end)
    return Status::error(where + ": data_offsets [" + std::to_string(out.begin) + ", " +
                         std::to_string(out.end) + "] are reversed");
  if (overflow)
    return Status::error(where + ": shape " + shape_text(out.shape) + " of " +
                         std::string(dtype_name(out.dtype)) + " overflows a 64-bit byte count");
  if (out.end - out.begin != needed_bytes)
    return Status::error(where + ": data_offsets [" + std::to_string(out.begin) + ", " +
                         std::to_string(out.end) + "] hold " + std::to_string(out.end - out.begin) +
                         " bytes but shape " + shape_text(out.shape) + " of " +
                         std::string(dtype_name(out.dtype)) + " needs " + std::to_string(needed_bytes));
  return Status::ok();
}

Status parse_metadata(const std::string& file, const json& meta, std::map<std::string, std::string>& out) {
  // The reference writer stores str -> str; null is what some writers emit for "no metadata".
  if (meta.is_null()) return Status::ok();
  if (!meta.is_object())
    return Status::error(file + ": \"__metadata__\" must be an object of strings, got " + meta.type_name());
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string())
      return Status::error(file + ": \"__metadata__\" key " + quote(key) + " must be a string, got " +
                           value.type_name());
    out[key] = value.get<std::string>();
  }
  return Status::ok();
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors(const uint8_t* bytes, size_t size, const std::string& file) {
  if (size < kLengthBytes)
    return Status::error(file + ": file is " + std::to_string(size) +
                         " bytes, too short for the 8-byte header length (not a safetensors file?)");
  const uint64_t header_bytes = read_u64_le(bytes);
  if (header_bytes > kMaxHeaderBytes)
    return Status::error(file + ": header length " + std::to_string(header_bytes) + " exceeds the " +
                         std::to_string(kMaxHeaderBytes) + "-byte limit (corrupt file?)");
  if (header_bytes > size - kLengthBytes)
    return Status::error(file + ": header length " + std::to_string(header_bytes) +
                         " is larger than the rest of the file (" + std::to_string(size - kLengthBytes) +
                         " bytes; truncated file?)");

  SafetensorsHeader header;
  header.data_offset = kLengthBytes + header_bytes;
  header.data_bytes = size - header.data_offset;

  // Duplicate top-level keys would otherwise be resolved silently by the parser (last one wins), so
  // the callback records them; depth 1 is the header object's own keys.
  std::string duplicate;
  std::set<std::string> seen;
  json::parser_callback_t note_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string() && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  json doc;
  const char* text = reinterpret_cast<const char*>(bytes + kLengthBytes);
  // The parser takes a NUL as the end of its input and would ignore whatever follows; JSON text never
  // holds a raw NUL, so one means a corrupt header.
  if (const void* nul = std::memchr(text, 0, header_bytes))
    return Status::error(file + ": header is not valid JSON: NUL byte at offset " +
                         std::to_string(static_cast<const char*>(nul) - text));
  try {
    doc = json::parse(text, text + header_bytes, note_duplicates);
  } catch (const json::exception& e) {
    return Status::error(file + ": header is not valid JSON: " + json_error_text(e));
  }
  if (!doc.is_object()) return Status::error(file + ": header must be a JSON object, got " + doc.type_name());
  if (!duplicate.empty())
    return Status::error(file + ": tensor " + quote(duplicate) + " appears twice in the header");

  header.tensors.reserve(doc.size());
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      HELIUM_RETURN_IF_ERROR(parse_metadata(file, entry, header.metadata));
      continue;
    }
    SafetensorsTensor t;
    t.name = name;
    const std::string where = file + ": tensor " + quote(name);
    HELIUM_RETURN_IF_ERROR(parse_entry(where, entry, t));
    if (t.end > header.data_bytes)
      return Status::error(where + ": data_offsets [" + std::to_string(t.begin) + ", " +
                           std::to_string(t.end) + "] end beyond the data region of " +
                           std::to_string(header.data_bytes) + " bytes (truncated file?)");
    header.tensors.push_back(std::move(t));
  }

  // Overlap check in data order. Gaps are accepted (some writers align tensors); empty tensors occupy
  // no bytes and so cannot overlap anything.
  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const SafetensorsTensor* previous = nullptr;
  for (const auto& t : header.tensors) {
    if (t.begin == t.end) continue;
    if (previous != nullptr && t.begin < previous->end)
      return Status::error(file + ": tensor " + quote(t.name) + ": data_offsets [" + std::to_string(t.begin) +
                           ", " + std::to_string(t.end) + "] overlap tensor " + quote(previous->name) +
                           " at [" + std::to_string(previous->begin) + ", " + std::to_string(previous->end) +
                           "]");
    previous = &t;
  }
  return header;
}

Status load_safetensors(const std::string& path, WeightMap& map) {
  try {
    HELIUM_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
    HELIUM_ASSIGN_OR_RETURN(SafetensorsHeader header, parse_safetensors(file->data(), file->size(), path));

    // All checks before the first add(), so that a failing file leaves `map` as it was.
    for (const auto& t : header.tensors) {
      if (const WeightInfo* other = map.find(t.name))
        return Status::error(path + ": tensor " + quote(t.name) + " is also in " + other->file);
    }

    // The reference writer aligns only the header, so a tensor may start at an offset that is not a
    // multiple of its element size (e.g. F32 after an odd-length F16). Such tensors are copied to an
    // aligned buffer owned by the map, since reading a misaligned float through a float* is undefined.
    const uint8_t* data = header.tensors.empty() ? nullptr : file->data() + header.data_offset;
    size_t misaligned_bytes = 0;
    auto is_misaligned = [&](const SafetensorsTensor& t) {
      return t.end > t.begin &&
             reinterpret_cast<uintptr_t>(data + t.begin) % static_cast<uintptr_t>(dtype_bytes(t.dtype)) != 0;
    };
    for (const auto& t : header.tensors)
      if (is_misaligned(t)) misaligned_bytes += (t.end - t.begin + 15) / 16 * 16;
    std::shared_ptr<uint8_t[]> copies;
    if (misaligned_bytes > 0) copies = std::make_shared<uint8_t[]>(misaligned_bytes);
    size_t copy_at = 0;

    for (const auto& t : header.tensors) {
      WeightInfo info;
      info.name = t.name;
      info.file = path;
      info.dtype = t.dtype;
      info.shape = t.shape;
      info.bytes = static_cast<size_t>(t.end - t.begin);
      info.data = data + t.begin;
      if (is_misaligned(t)) {
        // operator new[] storage is aligned for any scalar type and copy_at stays a multiple of 16.
        std::memcpy(copies.get() + copy_at, data + t.begin, info.bytes);
        info.data = copies.get() + copy_at;
        copy_at += (info.bytes + 15) / 16 * 16;
      }
      map.add(std::move(info));
    }
    map.keep_alive(file);
    if (copies) map.keep_alive(copies);
    return Status::ok();
  } catch (const std::exception& e) {  // allocation failures: errors stay values at the border
    return Status::error(path + ": " + e.what());
  }
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the entries in the caller's order, which is also the data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  }
  std::set<std::string> names;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::string where = path + ": tensor " + quote(t.name);
    if (t.name.empty() || t.name == "__metadata__") return Status::error(where + ": reserved name");
    if (!names.insert(t.name).second) return Status::error(where + ": given twice");
    uint64_t bytes = static_cast<uint64_t>(dtype_bytes(t.dtype));
    for (int64_t d : t.shape) {
      if (d < 0) return Status::error(where + ": negative dimension in shape " + shape_text(t.shape));
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        return Status::error(where + ": shape " + shape_text(t.shape) + " is too large");
    }
    if (bytes > 0 && t.data == nullptr) return Status::error(where + ": no data");
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    sizes.push_back(bytes);
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata value that is not UTF-8
    return Status::error(path + ": cannot encode header: " + json_error_text(e));
  }
  // Pad with spaces (valid JSON whitespace) so the data region starts 8-byte aligned, as the
  // reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  uint8_t length[kLengthBytes];
  for (size_t i = 0; i < kLengthBytes; ++i) length[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::error(path + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(length, 1, kLengthBytes, f) == kLengthBytes &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (size_t i = 0; ok && i < tensors.size(); ++i)
    ok = sizes[i] == 0 || std::fwrite(tensors[i].data, 1, sizes[i], f) == sizes[i];
  int saved_errno = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) return Status::error(path + ": write failed: " + std::strerror(saved_errno));
  return Status::ok();
}

}  // namespace helium
