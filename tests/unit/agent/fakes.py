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

"""Builders of agent model values for the unit tests."""

from rdt_virt.agent import model

U1 = '11111111-1111-4111-8111-111111111111'
U2 = '22222222-2222-4222-8222-222222222222'
U3 = '33333333-3333-4333-8333-333333333333'
P = 'rdtvirt-'
M1 = P + 'm-' + U1
M2 = P + 'm-' + U2
I1 = P + 'i-' + U1
LV1 = 'qemu-1-instance-1-vcpus_0-1'
ROOT_SCH = {'L3': {0: 0x7ff, 1: 0x7ff}, 'MB': {0: 100, 1: 100}}


def shared(pct):
    return model.BandwidthPolicy('percent', pct, pct, model.SHARED)


def mbps(value):
    return model.BandwidthPolicy('MBps', value, value, model.INSTANCE)


def libvirt_bw(pct):
    return model.BandwidthPolicy('percent', pct, pct, model.LIBVIRT)


def inst(uuid=U1, bw=None, allocs=(), monitor=True, name=None, dom_id=1):
    return model.Instance(uuid, name or 'instance-%s' % uuid[0], dom_id,
                          allocations=tuple(allocs), bandwidth=bw,
                          monitor=monitor)


def alloc(group=LV1, vcpus=(0, 1), kib=3328, bandwidth=None, monitor=True,
          cache_ids=(0, 1), ctype='both'):
    caches = tuple(model.CacheRequest(3, ctype, dom, kib * 1024)
                   for dom in cache_ids) if kib else ()
    return model.Allocation(group, frozenset(vcpus), caches,
                            bandwidth or {}, monitor)


def threads(base=100, vcpus=2, others=(), pid=None):
    return model.Threads(pid or base, {i: base + 1 + i for i in range(vcpus)},
                         tuple(others))


def group(name, tasks=(), schemata=None, mons=None):
    mons = {k: frozenset(v) for k, v in (mons or {}).items()}
    return model.GroupState(name, frozenset(tasks), schemata, mons,
                            frozenset(mons))


def snap(*groups, root=None, root_mons=None, complete=True):
    found = {None: group(None, (), dict(root or ROOT_SCH), root_mons)}
    for g in groups:
        found[g.name] = g
    return model.Snapshot(found, complete)


def sch(mb=None, l3=0x7ff, doms=(0, 1)):
    """Schemata of an agent group: the root's L3 and an MB line."""
    out = {'L3': {d: l3 for d in doms}}
    if mb is not None:
        out['MB'] = {d: mb for d in doms}
    return out
