# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Scheduler-side fakes: HostStates with rdt-virt stats, RequestSpecs."""

import dataclasses

import fixtures
from nova import objects
from nova.scheduler import host_manager

from nova_plugin.scheduler import state as sched_state
from rdt_virt.policy import capacity
from rdt_virt.policy import hoststats
from tests.unit.policy import hosts

objects.register_all()

REFERENCE = hosts.REFERENCE
CDP = hosts.CDP
MBPS = hosts.MBPS
AMD = hosts.AMD
NONE = hosts.NONE
L3_CAT = hosts.L3_CAT


def fresh_capacity(caps, free_ways=0x7f0, closids=None, rmids=None,
                   shared=()):
    """Free capacity of ``caps`` with ``free_ways`` free on every cache."""
    return capacity.Capacity(
        free_closids=(caps.num_closids - 1 if closids is None
                      else closids),
        free_rmids=(None if caps.monitor is None else
                    caps.num_rmids - 1 if rmids is None else rmids),
        free_masks={name: {dom: free_ways & res.cbm_mask
                           for dom in res.domain_ids}
                    for name, res in caps.caches.items()},
        shared_groups=frozenset(shared))


def stats(caps=REFERENCE, strategy='per-instance', monitoring=True,
          mbw=None, classes=None, claimed=None, **capacity_kw):
    """Compute node stats as the driver reports them (all strings).

    :param classes: ``{domain id: (high, low)}`` instances of each class.
    :param claimed: the UUIDs a periodic report names (None: a report
        taken as an instance left, or an older rdt-virt's).
    """
    rdt = hoststats.HostRDT(caps=caps,
                            capacity=fresh_capacity(caps, **capacity_kw),
                            strategy=strategy, monitoring=monitoring,
                            mbw=mbw, classes=classes or {},
                            claimed=claimed)
    result = {'num_instances': '3', 'failed_builds': '0'}
    result.update(hoststats.encode(rdt))
    return result


def host_state(name='host1', stats_=None, aggregates=(), free_ram_mb=4096):
    """A nova HostState with ``stats_`` (None: a host without rdt-virt)."""
    hs = host_manager.HostState(name, name + '-node', 'cell1')
    hs.stats = dict(stats_ or {'num_instances': '0'})
    hs.aggregates = list(aggregates)
    hs.free_ram_mb = free_ram_mb
    return hs


def aggregate(**metadata):
    return objects.Aggregate(id=1, uuid='00000000-0000-0000-0000-00000000000a',
                             name='agg', hosts=[], metadata=metadata)


def request_spec(extra_specs=None, rebuild=False):
    flavor = objects.Flavor(name='flavor', vcpus=1, memory_mb=512,
                            root_gb=1, ephemeral_gb=0, swap=0,
                            extra_specs=dict(extra_specs or {}))
    hints = {'_nova_check_type': ['rebuild']} if rebuild else {}
    return objects.RequestSpec(flavor=flavor, scheduler_hints=hints,
                               num_instances=1)


def replace_capacity(stats_, **changes):
    """``stats_`` with some Capacity fields changed."""
    rdt = hoststats.decode(stats_)
    rdt = dataclasses.replace(
        rdt, capacity=dataclasses.replace(rdt.capacity, **changes))
    return dict(stats_, **hoststats.encode(rdt))


class SchedulerState(fixtures.Fixture):
    """Forget the scheduler's per-node views, before and after a test.

    They are kept per node name across requests, and tests reuse names.
    """

    def _setUp(self):
        sched_state._views.clear()
        self.addCleanup(sched_state._views.clear)
