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

"""RDTWeigher: RDT headroom and memory bandwidth pressure.

Enable it in nova.conf of nova-scheduler::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers
    weight_classes = nova_plugin.scheduler.weights.RDTWeigher
    rdt_weight_multiplier = 1.0

For a request with RDT extra specs, a host weighs::

    headroom - pressure

``headroom`` (0..1) is what the request leaves of the scarcest RDT resource
it uses: CLOSIDs for a new control group, contiguous free ways per cache
domain, RMIDs (:func:`nova_plugin.scheduler.state.headroom`). ``pressure``
(0..1) is the memory bandwidth rdt-virt-agent measured on the host, relative
to the busiest host weighed; a host without a measurement counts as the
average of those with one. Nova normalises the weights across hosts before
applying the multiplier.

A request of a protection class (``hw:rdt_priority=high`` or ``low``)
weighs::

    headroom - pressure - high

``high`` (0..1) is the number of high-priority instances on the host's
memory bandwidth domain that has the most, relative to the host with the
most among those weighed (0 when none has any):

* a high request goes where few high instances are, so protected
  instances stay apart and the controller has low instances to throttle
  for each of them, not other protected ones it cannot touch;
* a low request goes where it will have bandwidth to use: little measured
  bandwidth (``pressure``) and few high instances that the controller
  would throttle it for. A host without MBA or MBM holds no high instance
  (RDTFilter refuses them there) and takes low ones, which run
  unthrottled there: its ``high`` is 0, so a low request prefers it to a
  host with high instances, as it prefers any host without them.

Normal requests are weighed as before. Every term is read from the host's
decoded stats and cached per host, so a host costs the same few lookups
with classes as without.

A request without RDT extra specs gets weight 0 everywhere, so the weigher
does not change its placement. The multiplier is
``[filter_scheduler] rdt_weight_multiplier``, overridable per aggregate with
the metadata key ``rdt_weight_multiplier``.
"""

import threading

from nova.scheduler import utils
from nova.scheduler import weights

from nova_plugin import conf as plugin_conf
from nova_plugin.scheduler import state

CONF = plugin_conf.CONF


class RDTWeigher(weights.BaseHostWeigher):
    """Prefer hosts with RDT headroom and little memory bandwidth in use."""

    def __init__(self):
        super().__init__()
        # Nova calls weight_multiplier() for every host right after
        # weigh_objects(); for a request without RDT every weight is 0 and
        # the aggregate lookup can be skipped.
        self._local = threading.local()

    def weight_multiplier(self, host_state):
        """``rdt_weight_multiplier``, per aggregate if set there."""
        local = self._local
        if not getattr(local, 'active', True):
            return 0.0
        default = getattr(local, 'multiplier', None)
        if default is None:
            default = CONF.filter_scheduler.rdt_weight_multiplier
        if not host_state.aggregates:
            # What get_weight_multiplier() returns without aggregates.
            return default
        return utils.get_weight_multiplier(
            host_state, 'rdt_weight_multiplier', default)

    def _weigh_object(self, host_state, weight_properties):
        # Only used through weigh_objects(), which needs every host at once
        # to scale the bandwidth pressure.
        return self.weigh_objects([_Weighed(host_state)],
                                  weight_properties)[0]

    def weigh_objects(self, weighed_obj_list, weight_properties):
        """Weights of all hosts for one request (higher is better)."""
        request = state.request_view(weight_properties)
        if request.policy is None or request.error is not None:
            self._local.active = False
            self._local.multiplier = None
            return [0.0] * len(weighed_obj_list)
        self._local.active = True
        self._local.multiplier = CONF.filter_scheduler.rdt_weight_multiplier
        verdicts = [state.verdict(obj.obj, request)
                    for obj in weighed_obj_list]
        headrooms = [v.headroom or 0.0 for v in verdicts]
        if request.policy.classed:
            most = max((v.high for v in verdicts), default=0)
            if most > 0:
                headrooms = [h - v.high / most
                             for h, v in zip(headrooms, verdicts)]
        mbws = [v.mbw for v in verdicts]
        known = [m for m in mbws if m is not None]
        top = max(known, default=0.0)
        if top <= 0:
            return headrooms
        unknown = sum(known) / len(known)
        return [h - (unknown if m is None else m) / top
                for h, m in zip(headrooms, mbws)]


class _Weighed(object):
    __slots__ = ('obj',)

    def __init__(self, obj):
        self.obj = obj
