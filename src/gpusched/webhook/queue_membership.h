#pragma once

// Which GPU queue a pod may join by its label gpusched.io/queue, as the scheduler judges it (sched::GpuQueues's
// JoinRefusal; the same rule and the same words), so that the webhook refuses at admission, with the reason, a pod
// the scheduler would never count in the queue it names.
//
//   * A declared queue admits the namespaces listed in its spec.namespaces or in its parent's.
//   * The default queue, when not declared, admits the namespaces no declared queue serves; declared, those it lists
//     and those no queue serves.
//   * A queue nobody declared (other than default): nothing to judge here (the scheduler keeps such a pod waiting
//     with "queue x does not exist"; the queue may be created later, and the scheduler judges it then).
// Only the queues that are valid together count (core::ValidateQueues), as for the scheduler.
//
// QueueDirectory holds the queues the webhook last listed, for the handler threads; it is refreshed by
// `gpusched webhook --queues` (cli/webhook_command.cc) from the API server.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpusched/core/gpu_queue.h"

namespace gpusched::webhook {

class QueueView {
 public:
  QueueView() = default;
  // Keeps the valid ones of `specs` (core::ValidateQueues).
  explicit QueueView(const std::vector<core::QueueSpec>& specs);

  // Why a pod of `namespace_` may not join `queue`; empty when it may or when no such queue is declared.
  [[nodiscard]] std::string JoinRefusal(const std::string& queue, const std::string& namespace_) const;
  [[nodiscard]] size_t size() const { return queues_.size(); }

 private:
  std::map<std::string, core::QueueSpec, std::less<>> queues_;
  std::map<std::string, std::string, std::less<>> by_namespace_;  // namespace -> the queue serving it
};

class QueueDirectory {
 public:
  void Set(const std::vector<core::QueueSpec>& specs);
  // The last queues set (empty before the first Set). Never null.
  [[nodiscard]] std::shared_ptr<const QueueView> Get() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const QueueView> view_ = std::make_shared<const QueueView>();
};

}  // namespace gpusched::webhook
