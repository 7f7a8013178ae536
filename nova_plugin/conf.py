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

"""Options of the Nova side of rdt-virt.

The ``[rdt]`` group (:mod:`rdt_virt.conf.rdt`) configures how a compute host
uses resctrl and is shared with rdt-virt-agent. This module only adds what
Nova's own services need:

* ``[filter_scheduler] rdt_weight_multiplier`` for ``RDTWeigher``, next to
  Nova's other weigher multipliers.

``register_opts`` is idempotent, so the filter, the weigher and the driver
can each call it at import time.
"""

from oslo_config import cfg

from rdt_virt import conf as rdt_conf
from rdt_virt.i18n import _

CONF = rdt_conf.CONF

# Nova registers the group itself; declaring it here as well keeps the
# option loadable (and listed by oslo-config-generator) without nova.conf.
filter_scheduler_group = cfg.OptGroup(
    'filter_scheduler',
    title=_('Filter scheduler options'))

weigher_opts = [
    cfg.FloatOpt(
        'rdt_weight_multiplier',
        default=1.0,
        help=_("""
Multiplier of ``RDTWeigher``.

For a request whose flavor has RDT extra specs (``hw:mem_bw``,
``hw:cache_l3``, ...), ``RDTWeigher`` prefers hosts with more RDT
headroom (free CLOSIDs, contiguous free cache ways and RMIDs left after
the request) and less measured memory bandwidth. Requests without RDT
extra specs weigh the same on every host, so the weigher does not change
their placement.

This option is only used by the FilterScheduler and its subclasses. It
can be overridden per host aggregate with the aggregate metadata key
``rdt_weight_multiplier``.

Possible values:

* A positive number: prefer hosts with more RDT headroom and less memory
  bandwidth pressure (spread).
* A negative number: prefer the fullest hosts (pack).
* 0: disable the weigher.

Related options:

* ``[filter_scheduler] weight_classes`` must include
  ``nova_plugin.scheduler.weights.RDTWeigher``.
""")),
]


def register_opts(conf=CONF):
    """Register the options of this module on ``conf``."""
    conf.register_group(filter_scheduler_group)
    conf.register_opts(weigher_opts, group=filter_scheduler_group)


def list_opts():
    """``[(group, [opts])]`` for oslo-config-generator."""
    return [(filter_scheduler_group, weigher_opts)]


register_opts()
