#include "gpusched/sim/trace_reader.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

namespace gpusched::sim {
namespace {

// Splits one CSV line (RFC 4180 quotes allowed; the openb files use none).
common::Result<std::vector<std::string>> SplitCsv(std::string_view line, const std::string& where) {
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (quoted) {
    return common::InvalidArgument(where + ": unterminated quoted field");
  }
  fields.push_back(std::move(cur));
  return fields;
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> line_numbers;
};

common::Result<Table> ParseTable(std::string_view text, std::string_view source) {
  Table t;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      if (pos > text.size()) {
        break;
      }
      continue;
    }
    const std::string where = std::string(source) + ":" + std::to_string(line_no);
    auto fields = SplitCsv(line, where);
    if (!fields.ok()) {
      return fields.status();
    }
    if (t.header.empty()) {
      t.header = std::move(fields.value());
    } else {
      t.rows.push_back(std::move(fields.value()));
      t.line_numbers.push_back(line_no);
    }
  }
  if (t.header.empty()) {
    return common::InvalidArgument(std::string(source) + ": empty file, expected a CSV header");
  }
  return t;
}

common::Result<size_t> Column(const Table& t, std::string_view name, std::string_view source) {
  auto it = std::find(t.header.begin(), t.header.end(), name);
  if (it == t.header.end()) {
    return common::InvalidArgument(std::string(source) + ":1: missing column '" + std::string(name) + "'");
  }
  return static_cast<size_t>(it - t.header.begin());
}

// Cell (row r, column c) as a non-negative integer; errors name file:line:column (1-based column).
common::Result<int64_t> IntCell(const Table& t, size_t r, size_t c, std::string_view source) {
  const std::string where =
      std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" + std::to_string(c + 1) + ": ";
  if (c >= t.rows[r].size()) {
    return common::InvalidArgument(where + "missing value for column '" + t.header[c] + "' (row has " +
                                   std::to_string(t.rows[r].size()) + " fields)");
  }
  const std::string& s = t.rows[r][c];
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) {
    return common::InvalidArgument(where + "column '" + t.header[c] + "' is not an integer: '" + s + "'");
  }
  if (v < 0) {
    return common::InvalidArgument(where + "column '" + t.header[c] + "' is negative: " + s);
  }
  return v;
}

common::Result<std::string> StrCell(const Table& t, size_t r, size_t c, std::string_view source, bool required) {
  if (c >= t.rows[r].size()) {
    return common::InvalidArgument(std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" +
                                   std::to_string(c + 1) + ": missing value for column '" + t.header[c] + "'");
  }
  if (required && t.rows[r][c].empty()) {
    return common::InvalidArgument(std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" +
                                   std::to_string(c + 1) + ": column '" + t.header[c] + "' is empty");
  }
  return t.rows[r][c];
}

std::vector<std::string> SplitModels(const std::string& spec) {
  std::vector<std::string> out;
  std::stringstream ss(spec);
  std::string m;
  while (std::getline(ss, m, '|')) {
    if (!m.empty()) {
      out.push_back(m);
    }
  }
  return out;
}

common::Result<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return common::NotFound("cannot open " + path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

common::Result<std::vector<TraceNode>> ParseNodeList(std::string_view text, std::string_view source) {
  GPUSCHED_ASSIGN_OR_RETURN(t, ParseTable(text, source));
  GPUSCHED_ASSIGN_OR_RETURN(c_name, Column(t, "sn", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_cpu, Column(t, "cpu_milli", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_mem, Column(t, "memory_mib", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_gpu, Column(t, "gpu", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_model, Column(t, "model", source));
  std::vector<TraceNode> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    TraceNode n;
    GPUSCHED_ASSIGN_OR_RETURN(name, StrCell(t, r, c_name, source, true));
    GPUSCHED_ASSIGN_OR_RETURN(cpu, IntCell(t, r, c_cpu, source));
    GPUSCHED_ASSIGN_OR_RETURN(mem, IntCell(t, r, c_mem, source));
    GPUSCHED_ASSIGN_OR_RETURN(gpus, IntCell(t, r, c_gpu, source));
    GPUSCHED_ASSIGN_OR_RETURN(model, StrCell(t, r, c_model, source, false));
    if (gpus > 64) {
      return common::InvalidArgument(std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" +
                                     std::to_string(c_gpu + 1) +
                                     ": column 'gpu' is implausible: " + std::to_string(gpus));
    }
    if (gpus > 0 && model.empty()) {
      return common::InvalidArgument(std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" +
                                     std::to_string(c_model + 1) + ": a node with GPUs needs a model");
    }
    out.push_back(TraceNode{.name = std::move(name),
                            .cpu_milli = cpu,
                            .memory_mib = mem,
                            .gpus = static_cast<int32_t>(gpus),
                            .model = std::move(model)});
  }
  return out;
}

common::Result<std::vector<TracePod>> ParsePodList(std::string_view text, std::string_view source) {
  GPUSCHED_ASSIGN_OR_RETURN(t, ParseTable(text, source));
  GPUSCHED_ASSIGN_OR_RETURN(c_name, Column(t, "name", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_cpu, Column(t, "cpu_milli", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_mem, Column(t, "memory_mib", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_ngpu, Column(t, "num_gpu", source));
  GPUSCHED_ASSIGN_OR_RETURN(c_milli, Column(t, "gpu_milli", source));
  const auto spec_it = std::find(t.header.begin(), t.header.end(), "gpu_spec");
  const bool has_spec = spec_it != t.header.end();
  const auto c_spec = static_cast<size_t>(spec_it - t.header.begin());
  auto optional_column = [&t](const char* name) -> std::optional<size_t> {
    auto it = std::find(t.header.begin(), t.header.end(), name);
    return it == t.header.end() ? std::nullopt : std::optional<size_t>(static_cast<size_t>(it - t.header.begin()));
  };
  const std::optional<size_t> c_created = optional_column("creation_time");
  const std::optional<size_t> c_deleted = optional_column("deletion_time");
  const std::optional<size_t> c_qos = optional_column("qos");
  std::vector<TracePod> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    GPUSCHED_ASSIGN_OR_RETURN(name, StrCell(t, r, c_name, source, true));
    GPUSCHED_ASSIGN_OR_RETURN(cpu, IntCell(t, r, c_cpu, source));
    GPUSCHED_ASSIGN_OR_RETURN(mem, IntCell(t, r, c_mem, source));
    GPUSCHED_ASSIGN_OR_RETURN(ngpu, IntCell(t, r, c_ngpu, source));
    GPUSCHED_ASSIGN_OR_RETURN(milli, IntCell(t, r, c_milli, source));
    if (ngpu > 64) {
      return common::InvalidArgument(std::string(source) + ":" + std::to_string(t.line_numbers[r]) + ":" +
                                     std::to_string(c_ngpu + 1) +
                                     ": column 'num_gpu' is implausible: " + std::to_string(ngpu));
    }
    TracePod p{.name = std::move(name),
               .cpu_milli = cpu,
               .memory_mib = mem,
               .num_gpu = static_cast<int32_t>(ngpu),
               .gpu_milli = milli};
    if (has_spec && c_spec < t.rows[r].size()) {
      p.gpu_spec = SplitModels(t.rows[r][c_spec]);
    }
    for (auto [column, field] :
         {std::pair{c_created, &TracePod::creation_s}, std::pair{c_deleted, &TracePod::deletion_s}}) {
      if (column.has_value() && *column < t.rows[r].size() && !t.rows[r][*column].empty()) {
        GPUSCHED_ASSIGN_OR_RETURN(v, IntCell(t, r, *column, source));
        p.*field = v;
      }
    }
    if (c_qos.has_value() && *c_qos < t.rows[r].size()) {
      p.qos = t.rows[r][*c_qos];
    }
    out.push_back(std::move(p));
  }
  return out;
}

common::Result<std::vector<TraceNode>> ReadNodeList(const std::string& path) {
  GPUSCHED_ASSIGN_OR_RETURN(text, Slurp(path));
  return ParseNodeList(text, path);
}

common::Result<std::vector<TracePod>> ReadPodList(const std::string& path) {
  GPUSCHED_ASSIGN_OR_RETURN(text, Slurp(path));
  return ParsePodList(text, path);
}

int64_t ModelMemoryMib(std::string_view model) {
  if (model == "P100" || model == "V100M16") {
    return 16384;
  }
  if (model == "T4") {
    return 15360;
  }
  if (model == "V100M32") {
    return 32768;
  }
  if (model == "A10") {
    return 24576;
  }
  return 0;
}

core::Node ToNode(const TraceNode& n) {
  core::Node node{
      .name = common::NodeName(n.name), .cpu = common::MilliCpu{n.cpu_milli}, .memory = common::MiB{n.memory_mib}};
  for (int32_t i = 0; i < n.gpus; ++i) {
    node.gpus.push_back(core::Gpu{.index = i,
                                  .uuid = common::GpuUuid("GPU-" + n.name + "-" + std::to_string(i)),
                                  .model = n.model,
                                  .memory = common::MiB{ModelMemoryMib(n.model)}});
  }
  return node;
}

core::PodRequest ToPodRequest(const TracePod& p) {
  core::PodRequest pod{.uid = common::PodUid(p.name),
                       .name = p.name,
                       .cpu = common::MilliCpu{p.cpu_milli},
                       .memory = common::MiB{p.memory_mib}};
  if (p.num_gpu > 0) {
    const int64_t milli = std::clamp<int64_t>(p.gpu_milli, 0, 1000);
    const bool whole = p.num_gpu >= 2 || milli >= 1000 || milli == 0;
    pod.containers.push_back(core::GpuRequest{.container = "main",
                                              .count = p.num_gpu,
                                              .milli_per_gpu = common::MilliGpu{whole ? 1000 : milli},
                                              .exclusive = whole,
                                              .models = p.gpu_spec});
  }
  return pod;
}

}  // namespace gpusched::sim
