#include "gpusched/webhook/queue_membership.h"

#include <algorithm>

namespace gpusched::webhook {

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
  const core::QueueSpec* spec = q != queues_.end() ? &q->second : nullptr;
  const auto parent = spec == nullptr || spec->parent.empty() ? queues_.end() : queues_.find(spec->parent);
  return core::QueueJoinRefusal(queue, spec, parent != queues_.end() ? &parent->second : nullptr,
                                served != by_namespace_.end() ? served->second : std::string(), namespace_);
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
