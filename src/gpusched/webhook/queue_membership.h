#pragma once

// Which GPU queue a pod may join by its label gpusched.io/queue, as the scheduler judges it: the one rule of
// core::QueueJoinRefusal, over the queues that are valid together (core::ValidateQueues), so that the webhook
// refuses at admission, with the scheduler's words, a pod the scheduler would never count in the queue it names.
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
