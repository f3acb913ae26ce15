#include "gpusched/webhook/queue_membership.h"

#include <algorithm>

namespace gpusched::webhook {
namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

bool Lists(const core::QueueSpec& q, const std::string& namespace_) {
  return std::find(q.namespaces.begin(), q.namespaces.end(), namespace_) != q.namespaces.end();
}

}  // namespace

QueueView::QueueView(const std::vector<core::QueueSpec>& specs) {
  const std::map<std::string, std::string> rejected = core::ValidateQueues(specs);
  for (const auto& spec : specs) {
    if (!spec.name.empty() && !rejected.contains(spec.name)) {
      queues_.emplace(spec.name, spec);
    }
  }
  for (const auto& [name, spec] : queues_) {
    for (const auto& ns : spec.namespaces) {
      by_namespace_.emplace(ns, name);  // the first by name keeps it, as ValidateQueues decides
    }
  }
}

std::string QueueView::JoinRefusal(const std::string& queue, const std::string& namespace_) const {
  const auto q = queues_.find(queue);
  const auto served = by_namespace_.find(namespace_);
  const std::string head = "pods of namespace " + namespace_ + " may not join queue " + queue + ": ";
  if (q == queues_.end()) {
    if (queue == core::kDefaultQueue && served != by_namespace_.end()) {
      return head + "namespace " + namespace_ + " is served by queue " + served->second;
    }
    return {};
  }
  const auto parent = q->second.parent.empty() ? queues_.end() : queues_.find(q->second.parent);
  if (Lists(q->second, namespace_) || (parent != queues_.end() && Lists(parent->second, namespace_))) {
    return {};
  }
  if (queue == core::kDefaultQueue && served == by_namespace_.end()) {
    return {};  // a declared default serves the rest
  }
  std::vector<std::string> admitted = q->second.namespaces;
  if (parent != queues_.end()) {
    admitted.insert(admitted.end(), parent->second.namespaces.begin(), parent->second.namespaces.end());
  }
  return head + (admitted.empty() ? "it admits no namespace (list " + namespace_ + " in its spec.namespaces" +
                                        (parent != queues_.end() ? " or its parent's" : "") + ")"
                                  : "it admits namespaces " + Join(admitted) + " only");
}

void QueueDirectory::Set(const std::vector<core::QueueSpec>& specs) {
  auto view = std::make_shared<const QueueView>(specs);
  std::lock_guard lock(mu_);
  view_ = std::move(view);
}

std::shared_ptr<const QueueView> QueueDirectory::Get() const {
  std::lock_guard lock(mu_);
  return view_;
}

}  // namespace gpusched::webhook
