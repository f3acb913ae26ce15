#include "gpusched/extender/wire.h"

#include <algorithm>
#include <cctype>

#include <simdjson.h>
#include <nlohmann/json.hpp>

namespace gpusched::extender {
namespace {

namespace od = simdjson::ondemand;

common::Status Bad(std::string_view what) { return common::InvalidArgument("extender request: " + std::string(what)); }

common::Status Bad(std::string_view what, simdjson::error_code e) {
  return common::InvalidArgument("extender request: " + std::string(what) + " (" + simdjson::error_message(e) + ")");
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

od::parser& Parser() {
  thread_local od::parser parser;
  return parser;
}

// Makes room for simdjson's padding after the bytes; the view stays valid while `body` is not modified.
simdjson::padded_string_view Padded(std::string& body) {
  body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(body.data(), body.size(), body.capacity());
}

// metadata.name of a Node object, `raw` pointing into a padded body. Go writes ObjectMeta first and name first, so
// the fast path reads it straight from the text; other orders take a second on-demand pass over that one object.
common::Result<std::string> NodeName(std::string_view raw, const std::string& body) {
  constexpr std::string_view kPrefix = R"({"metadata":{"name":")";
  if (raw.starts_with(kPrefix)) {
    const size_t end = raw.find('"', kPrefix.size());
    if (end != std::string_view::npos) {
      std::string_view name = raw.substr(kPrefix.size(), end - kPrefix.size());
      if (name.find('\\') == std::string_view::npos && !name.empty()) {
        return std::string(name);
      }
    }
  }
  thread_local od::parser parser;
  const size_t offset = static_cast<size_t>(raw.data() - body.data());
  const simdjson::padded_string_view view(raw.data(), raw.size(), body.capacity() - offset);
  od::document doc;
  std::string_view name;
  if (parser.iterate(view).get(doc) != simdjson::SUCCESS ||
      doc["metadata"]["name"].get_string().get(name) != simdjson::SUCCESS || name.empty()) {
    return Bad("a node in Nodes.items has no metadata.name");
  }
  return std::string(name);
}

common::Result<std::string_view> RawObject(od::value v, std::string_view what) {
  od::json_type type;
  if (auto e = v.type().get(type); e) {
    return Bad(what, e);
  }
  if (type != od::json_type::object) {
    return Bad(std::string(what) + " is not a JSON object");
  }
  std::string_view raw;
  if (auto e = simdjson::to_json_string(v).get(raw); e) {
    return Bad(what, e);
  }
  return raw;
}

common::Result<bool> IsNull(od::value v, std::string_view what) {
  bool is_null = false;
  if (auto e = v.is_null().get(is_null); e) {
    return Bad(what, e);
  }
  return is_null;
}

common::Status StringList(od::value v, std::string_view what, std::vector<std::string>& out) {
  od::array arr;
  if (auto e = v.get_array().get(arr); e) {
    return Bad(std::string(what) + " is not a list", e);
  }
  for (auto item : arr) {
    std::string_view s;
    if (auto e = item.get_string().get(s); e) {
      return Bad(std::string(what) + " holds a non-string", e);
    }
    out.emplace_back(s);
  }
  return common::Status::Ok();
}

common::Status EndOfDocument(od::document& doc) {
  const char* location = nullptr;
  if (doc.current_location().get(location) == simdjson::SUCCESS) {
    return Bad("trailing content after the JSON object");
  }
  return common::Status::Ok();
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  // Node names and most reasons need no escape: append them whole.
  const bool plain = std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c != '"' && c != '\\';
  });
  if (plain) {
    out += s;
    out += '"';
    return;
  }
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string JsonString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendJsonString(out, s);
  return out;
}

common::Result<ExtenderArgs> DecodeExtenderArgs(std::string body) {
  ExtenderArgs out;
  out.body = std::move(body);
  od::document doc;
  if (auto e = Parser().iterate(Padded(out.body)).get(doc); e) {
    return Bad("body is not JSON", e);
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj); e) {
    return Bad("body is not a JSON object", e);
  }
  bool names = false;
  std::vector<std::string> name_list;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) {
      return Bad("bad key", e);
    }
    od::value v;
    if (auto e = field.value().get(v); e) {
      return Bad(key, e);
    }
    if (IEquals(key, "Pod")) {
      GPUSCHED_ASSIGN_OR_RETURN(null, IsNull(v, "Pod"));
      if (null) {
        return Bad("Pod is null");
      }
      GPUSCHED_ASSIGN_OR_RETURN(raw, RawObject(v, "Pod"));
      out.pod = raw;
    } else if (IEquals(key, "Nodes")) {
      GPUSCHED_ASSIGN_OR_RETURN(null, IsNull(v, "Nodes"));
      if (null) {
        continue;
      }
      od::object list;
      if (auto e = v.get_object().get(list); e) {
        return Bad("Nodes is not a NodeList object", e);
      }
      out.full_nodes = true;
      for (auto f : list) {
        std::string_view k;
        if (auto e = f.unescaped_key().get(k); e) {
          return Bad("bad key in Nodes", e);
        }
        if (k != "items") {
          continue;
        }
        od::value items_value;
        if (auto e = f.value().get(items_value); e) {
          return Bad("Nodes.items", e);
        }
        GPUSCHED_ASSIGN_OR_RETURN(items_null, IsNull(items_value, "Nodes.items"));
        if (items_null) {
          continue;
        }
        od::array items;
        if (auto e = items_value.get_array().get(items); e) {
          return Bad("Nodes.items is not a list", e);
        }
        for (auto item : items) {
          od::value iv;
          if (auto e = item.get(iv); e) {
            return Bad("Nodes.items", e);
          }
          GPUSCHED_ASSIGN_OR_RETURN(raw, RawObject(iv, "a node in Nodes.items"));
          GPUSCHED_ASSIGN_OR_RETURN(name, NodeName(raw, out.body));
          out.nodes.push_back(NodeRef{.name = std::move(name), .raw = raw});
        }
      }
    } else if (IEquals(key, "NodeNames")) {
      GPUSCHED_ASSIGN_OR_RETURN(null, IsNull(v, "NodeNames"));
      if (null) {
        continue;
      }
      names = true;
      GPUSCHED_RETURN_IF_ERROR(StringList(v, "NodeNames", name_list));
    }
  }
  GPUSCHED_RETURN_IF_ERROR(EndOfDocument(doc));
  if (out.pod.empty()) {
    return Bad("missing Pod");
  }
  if (!out.full_nodes && !names) {
    return Bad("neither Nodes nor NodeNames is given");
  }
  if (!out.full_nodes) {  // with both filled (kube-scheduler never does that) the full objects win
    out.nodes.reserve(name_list.size());
    for (auto& n : name_list) {
      out.nodes.push_back(NodeRef{.name = std::move(n)});
    }
  }
  return out;
}

std::string EncodeFilterResult(const FilterResult& r) {
  std::string out;
  size_t passed_bytes = 0;  // exact for echoed Node objects (megabytes: a reallocation would copy them all again)
  for (const NodeRef* n : r.passed) {
    passed_bytes += 1 + (r.full_nodes ? n->raw.size() : n->name.size() + 8);
  }
  size_t failed_bytes = r.error.size();  // names and reasons, quoted; an eighth more for escapes
  for (const auto* m : {&r.failed, &r.failed_unresolvable}) {
    for (const auto& [name, reason] : *m) {
      failed_bytes += name.size() + reason.size() + 6;
    }
  }
  out.reserve(128 + passed_bytes + failed_bytes + failed_bytes / 8);
  if (r.full_nodes) {
    out += R"({"Nodes":{"metadata":{},"items":[)";
    for (size_t i = 0; i < r.passed.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      out += r.passed[i]->raw;
    }
    out += R"(]},"NodeNames":null)";
  } else {
    out += R"({"Nodes":null,"NodeNames":[)";
    for (size_t i = 0; i < r.passed.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      AppendJsonString(out, r.passed[i]->name);
    }
    out += ']';
  }
  auto map = [&](std::string_view key, const std::vector<std::pair<std::string, std::string>>& m) {
    out += ",\"";
    out += key;
    out += "\":{";
    for (size_t i = 0; i < m.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      AppendJsonString(out, m[i].first);
      out += ':';
      AppendJsonString(out, m[i].second);
    }
    out += '}';
  };
  map("FailedNodes", r.failed);
  map("FailedAndUnresolvableNodes", r.failed_unresolvable);
  out += ",\"Error\":";
  AppendJsonString(out, r.error);
  out += '}';
  return out;
}

std::string EncodeHostPriorityList(const std::vector<std::pair<std::string, int64_t>>& scores) {
  std::string out;
  out.reserve(2 + scores.size() * 40);
  out += '[';
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += "{\"Host\":";
    AppendJsonString(out, scores[i].first);
    out += ",\"Score\":";
    out += std::to_string(scores[i].second);
    out += '}';
  }
  out += ']';
  return out;
}

common::Result<BindingArgs> DecodeBindingArgs(std::string body) {
  od::document doc;
  if (auto e = Parser().iterate(Padded(body)).get(doc); e) {
    return Bad("body is not JSON", e);
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj); e) {
    return Bad("body is not a JSON object", e);
  }
  BindingArgs out;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) {
      return Bad("bad key", e);
    }
    std::string* target = IEquals(key, "PodName")        ? &out.pod_name
                          : IEquals(key, "PodNamespace") ? &out.pod_namespace
                          : IEquals(key, "PodUID")       ? &out.pod_uid
                          : IEquals(key, "Node")         ? &out.node
                                                         : nullptr;
    if (target == nullptr) {
      continue;
    }
    std::string_view s;
    if (auto e = field.value().get_string().get(s); e) {
      return Bad(std::string(key) + " is not a string", e);
    }
    *target = std::string(s);
  }
  GPUSCHED_RETURN_IF_ERROR(EndOfDocument(doc));
  if (out.pod_name.empty()) {
    return Bad("missing PodName");
  }
  if (out.node.empty()) {
    return Bad("missing Node");
  }
  if (out.pod_namespace.empty()) {
    out.pod_namespace = "default";
  }
  return out;
}

std::string EncodeBindingResult(std::string_view error) { return "{\"Error\":" + JsonString(error) + "}"; }

common::Result<PreemptionArgs> DecodePreemptionArgs(std::string body) {
  PreemptionArgs out;
  out.body = std::move(body);
  od::document doc;
  if (auto e = Parser().iterate(Padded(out.body)).get(doc); e) {
    return Bad("body is not JSON", e);
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj); e) {
    return Bad("body is not a JSON object", e);
  }
  bool victims_seen = false;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) {
      return Bad("bad key", e);
    }
    od::value v;
    if (auto e = field.value().get(v); e) {
      return Bad(key, e);
    }
    const bool full = IEquals(key, "NodeNameToVictims");
    const bool meta = IEquals(key, "NodeNameToMetaVictims");
    if (IEquals(key, "Pod")) {
      GPUSCHED_ASSIGN_OR_RETURN(null, IsNull(v, "Pod"));
      if (null) {
        return Bad("Pod is null");
      }
      GPUSCHED_ASSIGN_OR_RETURN(raw, RawObject(v, "Pod"));
      out.pod = raw;
      continue;
    }
    if (!full && !meta) {
      continue;
    }
    const std::string what(key);
    GPUSCHED_ASSIGN_OR_RETURN(null, IsNull(v, what));
    if (null) {
      continue;
    }
    od::object nodes;
    if (auto e = v.get_object().get(nodes); e) {
      return Bad(what + " is not an object", e);
    }
    victims_seen = true;
    for (auto node : nodes) {
      std::string_view node_key;
      if (auto e = node.unescaped_key().get(node_key); e) {
        return Bad("bad node name in " + what, e);
      }
      std::string node_name(node_key);
      const std::string where = what + "[" + node_name + "]";
      od::object victims;
      if (auto e = node.value().get_object().get(victims); e) {
        return Bad(where + " is not an object", e);
      }
      NodeVictims nv;
      for (auto vf : victims) {
        std::string_view vk;
        if (auto e = vf.unescaped_key().get(vk); e) {
          return Bad("bad key in " + where, e);
        }
        od::value vv;
        if (auto e = vf.value().get(vv); e) {
          return Bad(where, e);
        }
        if (IEquals(vk, "NumPDBViolations")) {
          int64_t n = 0;
          if (auto e = vv.get_int64().get(n); e) {
            return Bad(where + ".NumPDBViolations is not an integer", e);
          }
          nv.num_pdb_violations = n;
        } else if (IEquals(vk, "Pods")) {
          GPUSCHED_ASSIGN_OR_RETURN(pods_null, IsNull(vv, where + ".Pods"));
          if (pods_null) {
            continue;
          }
          od::array pods;
          if (auto e = vv.get_array().get(pods); e) {
            return Bad(where + ".Pods is not a list", e);
          }
          for (auto p : pods) {
            od::object po;
            if (auto e = p.get_object().get(po); e) {
              return Bad(where + ".Pods holds a non-object", e);
            }
            std::string uid;
            for (auto pf : po) {
              std::string_view pk;
              if (auto e = pf.unescaped_key().get(pk); e) {
                return Bad("bad key in " + where + ".Pods", e);
              }
              if (meta && IEquals(pk, "UID")) {
                std::string_view s;
                if (auto e = pf.value().get_string().get(s); e) {
                  return Bad(where + ".Pods[].UID is not a string", e);
                }
                uid = std::string(s);
              } else if (full && pk == "metadata") {
                od::object md;
                if (auto e = pf.value().get_object().get(md); e) {
                  return Bad(where + ".Pods[].metadata is not an object", e);
                }
                for (auto mf : md) {
                  std::string_view mk;
                  if (auto e = mf.unescaped_key().get(mk); e) {
                    return Bad("bad key in a victim's metadata", e);
                  }
                  if (mk == "uid") {
                    std::string_view s;
                    if (auto e = mf.value().get_string().get(s); e) {
                      return Bad(where + ".Pods[].metadata.uid is not a string", e);
                    }
                    uid = std::string(s);
                  }
                }
              }
            }
            if (uid.empty()) {
              return Bad(where + ".Pods holds a pod without a UID");
            }
            nv.pod_uids.push_back(std::move(uid));
          }
        }
      }
      out.nodes.emplace_back(std::move(node_name), std::move(nv));
    }
  }
  GPUSCHED_RETURN_IF_ERROR(EndOfDocument(doc));
  if (out.pod.empty()) {
    return Bad("missing Pod");
  }
  if (!victims_seen) {
    return Bad("neither NodeNameToVictims nor NodeNameToMetaVictims is given");
  }
  return out;
}

std::string EncodePreemptionResult(const std::vector<std::pair<std::string, NodeVictims>>& nodes) {
  std::string out = R"({"NodeNameToMetaVictims":{)";
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    AppendJsonString(out, nodes[i].first);
    out += R"(:{"Pods":[)";
    const auto& v = nodes[i].second;
    for (size_t k = 0; k < v.pod_uids.size(); ++k) {
      if (k > 0) {
        out += ',';
      }
      out += "{\"UID\":";
      AppendJsonString(out, v.pod_uids[k]);
      out += '}';
    }
    out += "],\"NumPDBViolations\":";
    out += std::to_string(v.num_pdb_violations);
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace gpusched::extender
