"""Assertions on a bound pod's gpusched.io/allocation annotation, and the co-location scenario of interference-aware,
shared by the extender's and the scheduler's end-to-end suites (a mixin for unittest.TestCase)."""

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

    def colocation_scenario(self, create, node_of, pending_reason):
        """interference-aware on two 1-GPU P100 nodes (the caller made them): the first two pods take empty GPUs, a
        Transformer joins the Recommendation model (its measured best partner) rather than the ResNet-50, and a
        second ResNet-50, which does not fit in memory next to the first, waits with the model's reason.
        create(name, app) creates a pod of that application class; node_of(name) waits for it to be bound and
        returns its node; pending_reason(name) waits for the reason it stays pending. Returns that reason."""
        create("colo-resnet", "ResNet-50 (batch size 128)")
        resnet_node = node_of("colo-resnet")
        create("colo-rec", "Recommendation (batch size 1024)")
        rec_node = node_of("colo-rec")
        self.assertNotEqual(rec_node, resnet_node, "an empty GPU comes first")
        create("colo-transformer", "Transformer (batch size 64)")
        self.assertEqual(node_of("colo-transformer"), rec_node,
                         "the Transformer should join its best partner, the Recommendation model")
        create("colo-resnet-2", "ResNet-50 (batch size 128)")
        reason = pending_reason("colo-resnet-2")
        self.assertIn("predicted not to fit in memory", reason)
        return reason
