"""Many devices: a split of one step over devices, and collectives as kernels on the link roofs.

    Split(tp=4, pp=2)            tensor, pipeline, expert and data parallel degrees
    collective_op(...)           an all-reduce (all-gather, ...) as an Op whose bytes cross a link
    group_level(...)             which roof a group's collective sits under: the node's link or the network
    deploy(machine, split)       one deployment: the device, devices per node, the system, the most devices

A split is a transformation of the graph: the models room builds each device's share of the step
(heads, MLP columns and rows, vocabulary slices, layers of a stage) and inserts these collectives
where Megatron-style tensor parallelism and pipeline parallelism need them.
"""

from roofline.parallel.collectives import BUS_FACTOR, Collective, CollectiveCall, bus_bytes, collective_op
from roofline.parallel.deployment import MOST_DEVICES, NODE_DEVICES, Deployment, deploy, split_for_devices
from roofline.parallel.split import Split, divisors, group_level, stage_boundaries_across_nodes

__all__ = ["BUS_FACTOR", "MOST_DEVICES", "NODE_DEVICES", "Collective", "CollectiveCall", "Deployment", "Split",
           "bus_bytes", "collective_op", "deploy", "divisors", "group_level", "split_for_devices",
           "stage_boundaries_across_nodes"]
