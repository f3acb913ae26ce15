#pragma once

// Fakes with state for the ports: a ClusterSource holding nodes and allocations, and a Binder that records every
// bind and can be told to fail.

#include <string>
#include <utility>
#include <vector>

#include "gpusched/ports/binder.h"
#include "gpusched/ports/cluster_source.h"

namespace gpusched::testing {

class FakeClusterSource : public ports::ClusterSource {
 public:
  void AddNode(core::Node node) { nodes_.push_back(std::move(node)); }
  void AddAllocation(core::Allocation a) { allocations_.push_back(std::move(a)); }
  // Makes the next List* calls fail with this status (OK to heal).
  void SetError(common::Status s) { error_ = std::move(s); }

  [[nodiscard]] common::Result<std::vector<core::Node>> ListNodes() const override {
    if (!error_.ok()) {
      return error_;
    }
    return nodes_;
  }
  [[nodiscard]] common::Result<std::vector<core::Allocation>> ListAllocations() const override {
    if (!error_.ok()) {
      return error_;
    }
    return allocations_;
  }

 private:
  std::vector<core::Node> nodes_;
  std::vector<core::Allocation> allocations_;
  common::Status error_;
};

class RecordingBinder : public ports::Binder {
 public:
  // Fails the next `n` binds with `status`.
  void FailNext(int n, common::Status status) {
    fail_left_ = n;
    fail_status_ = std::move(status);
  }
  [[nodiscard]] common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) override {
    (void)pod;
    if (fail_left_ > 0) {
      --fail_left_;
      failed_.push_back(allocation);
      return fail_status_;
    }
    bound_.push_back(allocation);
    return common::Status::Ok();
  }
  [[nodiscard]] const std::vector<core::Allocation>& bound() const { return bound_; }
  [[nodiscard]] const std::vector<core::Allocation>& failed() const { return failed_; }

 private:
  std::vector<core::Allocation> bound_;
  std::vector<core::Allocation> failed_;
  int fail_left_ = 0;
  common::Status fail_status_;
};

}  // namespace gpusched::testing
