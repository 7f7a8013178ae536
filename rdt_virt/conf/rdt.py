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

"""The ``[rdt]`` group: how this host uses resctrl.

These options are read by every rdt-virt component on a compute host (the
nova-compute driver and ``rdt-virt-agent``), so both must see the same file.
"""

from oslo_config import cfg

from rdt_virt.i18n import _

PER_INSTANCE = 'per-instance'
SHARED = 'shared'

rdt_group = cfg.OptGroup(
    'rdt',
    title=_('RDT options'),
    help=_('How rdt-virt uses Intel RDT / AMD PQoS through the Linux resctrl '
           'filesystem on this compute host.'))

rdt_opts = [
    cfg.StrOpt(
        'resctrl_root',
        default='/sys/fs/resctrl',
        help=_("""
Path where the resctrl filesystem is mounted.

All resctrl reads and writes of rdt-virt go below this path. Change it only
for tests or for an emulated host; libvirt always uses /sys/fs/resctrl, so
the two must agree on a real compute host.

Possible values:

* An absolute path to a mounted resctrl filesystem.
""")),
    cfg.StrOpt(
        'kernel_release_file',
        default='/proc/sys/kernel/osrelease',
        help=_("""
File holding the release of the kernel that serves ``resctrl_root``.

One resctrl limit shows in no resctrl file: kernels before 6.16 use at most
32 CLOSIDs whatever ``info/*/num_closids`` says, so capacity is reported
from the release read here. An unreadable file counts as a kernel without
that limit. Change it only for tests or an emulated host (the emulator and
the sandbox write the release they emulate into a file of their own).

Possible values:

* A path to a file whose first line is a kernel release, such as
  ``6.1.0-18-amd64``.

Related options:

* ``[rdt] resctrl_root``
""")),
    cfg.StrOpt(
        'group_prefix',
        default='rdtvirt-',
        regex=r'^[a-z][a-z0-9_-]{0,31}$',
        help=_("""
Name prefix of the resctrl groups that rdt-virt creates.

rdt-virt only creates, changes or removes groups whose name starts with this
prefix (and the libvirt groups of domains that Nova owns). Groups of other
resctrl users, such as pqos or another orchestrator, are left alone.

Possible values:

* A lower-case name of 1 to 32 characters: letters, digits, ``_`` or ``-``,
  starting with a letter.
""")),
    cfg.IntOpt(
        'default_group_l3_ways',
        default=0,
        min=0,
        help=_("""
Number of L3 cache ways kept for the default resctrl group.

libvirt allocates dedicated ways (``hw:cache_l3``) only from ways that no
other group uses, the default group included; after a mount the default group
owns every way. When this is greater than 0, rdt-virt shrinks the default
group's L3 mask on every cache id to this many ways (the lowest ones, plus any
hardware-shared bits) so that the rest can be given to instances. The host,
its services and instances without a cache policy then share those ways.

Possible values:

* 0: leave the default group's L3 mask as it is (cache allocations are only
  possible if something else left room).
* N > 0: keep N ways for the default group; must be at least the
  hardware's ``min_cbm_bits`` and less than the number of ways.

Related options:

* ``[rdt] group_prefix``
""")),
    cfg.StrOpt(
        'mb_strategy',
        default=PER_INSTANCE,
        choices=[
            (PER_INSTANCE, _('Each throttled instance gets its own resctrl '
                             'group through libvirt <memorytune>; one CLOSID '
                             'per instance.')),
            (SHARED, _('Instances with the same hw:mem_bw percentage share '
                       'one control group managed by rdt-virt-agent; '
                       'capacity becomes RMIDs, not CLOSIDs.')),
        ],
        help=_("""
How instances that only have a memory bandwidth policy are grouped.

MBA in percent is a per-core throttle, so instances throttled to the same
percentage can share one control group with identical semantics. The shared
strategy needs ``rdt-virt-agent`` on the host; MBps policies and cache
allocations are always per instance.

Related options:

* ``[rdt] monitoring``
""")),
    cfg.BoolOpt(
        'monitoring',
        default=True,
        help=_("""
Monitor LLC occupancy and memory bandwidth of every instance by default.

Each monitored instance uses one RMID. The flavor extra spec
``hw:rdt_monitor`` overrides this per flavor.
""")),
    cfg.StrOpt(
        'state_file',
        default='/run/rdt-virt/host-state.json',
        help=_("""
File where rdt-virt-agent publishes the host's RDT state and per-instance
rates (replaced atomically), read by nova-compute and the Ceilometer
pollsters.

Possible values:

* An absolute path writable by rdt-virt-agent and readable by nova-compute
  and ceilometer-polling.
""")),
    cfg.IntOpt(
        'host_ready_timeout',
        default=60,
        min=0,
        help=_("""
Seconds nova-compute waits at start for the host's RDT to be ready.

Only when domains with an RDT policy are defined on the host (after a host
reboot with ``[DEFAULT] resume_guests_state_on_host_boot``, for example):
before it counts their claims and starts them again, nova-compute waits for
resctrl to be mounted and, for cache allocations with ``[rdt]
default_group_l3_ways`` set, for rdt-virt-agent to have shrunk the default
group to its reserved ways. If the ways are still not reserved when the time
is up, nova-compute reserves them itself (it needs write access to resctrl)
and says so in its log.

Possible values:

* 0: do not wait.
* N > 0: wait at most N seconds.

Related options:

* ``[rdt] default_group_l3_ways``
""")),
]


def register_opts(conf):
    conf.register_group(rdt_group)
    conf.register_opts(rdt_opts, group=rdt_group)


def list_opts():
    return {rdt_group: rdt_opts}
