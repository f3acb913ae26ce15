"""Assertions on a bound pod's gpusched.io/allocation annotation, shared by the extender's and the scheduler's
end-to-end suites (a mixin for unittest.TestCase)."""

import json

from kube import ALLOCATION_ANNOTATION


class AllocationChecks:
    def allocation(self, pod):
        name = pod["metadata"]["name"]
        text = pod["metadata"].get("annotations", {}).get(ALLOCATION_ANNOTATION)
        self.assertIsNotNone(text, f"bound pod {name} has no {ALLOCATION_ANNOTATION} annotation")
        try:
            alloc = json.loads(text)
        except ValueError as e:
            self.fail(f"{ALLOCATION_ANNOTATION} of {name} is not JSON ({e}): {text!r}")
        self.assertEqual(alloc.get("node"), pod["spec"]["nodeName"],
                         f"allocation node differs from spec.nodeName for {name}: {text}")
        self.assertIsInstance(alloc.get("id"), int, f"allocation id missing or not an integer: {text}")
        self.assertIsInstance(alloc.get("containers"), list, f"allocation has no containers list: {text}")
        return alloc

    def check_share_allocation(self, pod, limits):
        alloc = self.allocation(pod)
        name = pod["metadata"]["name"]
        self.assertEqual([c.get("name") for c in alloc["containers"]], ["main"], f"{name}: {alloc}")
        gpus = alloc["containers"][0].get("gpus") or []
        self.assertEqual(len(gpus), limits["gpusched.io/gpu"], f"{name}: {alloc}")
        for g in gpus:
            self.assertEqual(g.get("milli"), limits["gpusched.io/gpu-core"] * 10, f"{name}: {alloc}")
            self.assertEqual(g.get("memory_mib"), limits["gpusched.io/gpu-memory"], f"{name}: {alloc}")
            self.assertFalse(g.get("exclusive"), f"{name}: shared request got an exclusive GPU: {alloc}")
        return alloc
