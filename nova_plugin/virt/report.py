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

"""The RDT stat, refreshed when an instance leaves, not only every minute.

Nova copies a driver's stats into the compute node only in the
``update_available_resource`` periodic task; between two runs the resource
tracker saves the compute node (at every claim and every deletion) with
the stats of the last run. The scheduler learns from its own placements
that an instance arrived, but nothing tells it what an instance that left
gave back: when a host's instance count goes down, the scheduler returns
to the last report, which still holds the capacity of the instances just
deleted, and refuses boots that the host can take (up to a minute, the
periodic's default spacing).

:func:`publish` writes the fresh stat into the resource tracker's stats of
the node, so the save that records the deletion (``update_usage`` after
``destroy()``) carries it to the scheduler. The resource tracker is only
reachable through the compute manager that built the driver's VirtAPI;
without one (tools that load the driver alone) nothing is published and
the periodic report stays the only one.
"""

import time

from oslo_log import log as logging

from rdt_virt.policy import hoststats

LOG = logging.getLogger(__name__)


def stats_of(host_rdt):
    """The compute node stats of ``host_rdt``, named as a new report."""
    stats = hoststats.encode(host_rdt)
    stats[hoststats.REPORT_KEY] = '%d' % time.time_ns()
    return stats


def _tracker(virtapi):
    return getattr(getattr(virtapi, '_compute', None), 'rt', None)


def node_stats(virtapi, nodename):
    """The resource tracker's stats dict of ``nodename``, or None."""
    stats = getattr(_tracker(virtapi), 'stats', None)
    # The resource tracker makes a node's entry at its first report; a
    # node it does not track yet has nothing to refresh.
    if not stats or nodename not in stats:
        return None
    return stats[nodename]


def publish(virtapi, nodename, host_rdt):
    """Put ``host_rdt`` in the stats the next compute node save sends.

    Into the resource tracker's stats of the node, which it copies into
    the compute node whenever an instance's usage changes, and into the
    compute node's own copy, which a save after other changes (a move
    claim dropped at confirmation) sends as it is.

    :returns: True if published.
    """
    stats = node_stats(virtapi, nodename)
    if stats is None:
        return False
    encoded = stats_of(host_rdt)
    # One assignment per key: the resource tracker may be reading the
    # dict in another thread; a periodic run that replaces it afterwards
    # brings a report at least as recent as its own start.
    for key, value in encoded.items():
        stats[key] = value
    node = getattr(_tracker(virtapi), 'compute_nodes', {}).get(nodename)
    if node is not None and node.obj_attr_is_set('stats'):
        # A new dict, so that the compute node sees its field changed.
        node.stats = dict(node.stats or {}, **encoded)
    return True
