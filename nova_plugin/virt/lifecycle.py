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

"""What Nova's records say about an instance's stay on this host.

Nova does not call the driver back on every way an operation ends: the
destination of a live migration with a shared instance path is never told
that it failed (``_live_migration_cleanup_flags``), a rebuild can fail
between ``destroy`` and ``spawn``, a resize that failed at
``finish_migration`` leaves the source domain defined. The periodic
reconciliation of claims asks the database instead: these functions read
the Instance and Migration records and answer True only when the records
say so, False when they cannot be read (a claim is then kept).
"""

from nova.compute import task_states
from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# Migration statuses after which no compute host waits for the instance
# (those Nova's resource tracker does not count as in progress).
FINAL_MIGRATION_STATUSES = frozenset((
    'confirmed', 'reverted', 'error', 'failed', 'completed', 'cancelled',
    'done'))
# The task states of an instance between the destroy() and the creation
# of its domain again on the same host.
REBUILD = frozenset((task_states.REBUILDING,
                     task_states.REBUILD_BLOCK_DEVICE_MAPPING,
                     task_states.REBUILD_SPAWNING))
REVERT = frozenset((task_states.RESIZE_REVERTING,))


def _context():
    return nova_context.get_admin_context()


def _migrations(ctxt, uuid, migration_type=None):
    filters = {'instance_uuid': uuid}
    if migration_type:
        filters['migration_type'] = migration_type
    return sorted(objects.MigrationList.get_by_filters(ctxt, filters),
                  key=lambda m: m.id)


def live_migration_over(uuid):
    """True if the instance's latest live migration has ended.

    Successfully or not: the destination keeps its claim from then on only
    if the domain is defined here. An instance without live migrations has
    been deleted (Nova deletes its migrations with it): deleted after a
    live migration that failed, its destination heard of neither.
    """
    try:
        migrations = _migrations(_context(), uuid, 'live-migration')
    except Exception as e:
        LOG.warning('Cannot read the live migrations of instance %s: %s',
                    uuid, e)
        return False
    return not migrations or (migrations[-1].status in
                              FINAL_MIGRATION_STATUSES)


def task_state_in(uuid, states):
    """True unless the instance is known to have left ``states``."""
    try:
        instance = objects.Instance.get_by_uuid(_context(), uuid)
    except nova_exception.InstanceNotFound:
        return False
    except Exception as e:
        LOG.warning('Cannot read instance %s: %s', uuid, e)
        return True
    return instance.task_state in states


def same_host_resize_old_flavor(uuid, host):
    """The old flavor of a resize on ``host`` awaiting its confirmation.

    None if the instance is not resized on ``host`` to ``host``, or the
    records cannot be read.
    """
    ctxt = _context()
    try:
        migrations = [m for m in _migrations(ctxt, uuid)
                      if m.migration_type in ('resize', 'migration')]
        if not migrations:
            return None
        last = migrations[-1]
        if (last.status in FINAL_MIGRATION_STATUSES or
                last.source_compute != host or last.dest_compute != host):
            return None
        instance = objects.Instance.get_by_uuid(
            ctxt, uuid, expected_attrs=['old_flavor'])
    except Exception as e:
        LOG.warning('Cannot read the resize of instance %s: %s', uuid, e)
        return None
    return instance.old_flavor


def left_host(uuid, host):
    """True if the instance no longer lives on ``host`` nor will return.

    Deleted, or on another host with no migration from or to ``host`` in
    progress (a resize waiting for its confirmation is in progress).
    """
    ctxt = _context()
    try:
        instance = objects.Instance.get_by_uuid(ctxt, uuid)
    except nova_exception.InstanceNotFound:
        return True
    except Exception as e:
        LOG.warning('Cannot read instance %s: %s', uuid, e)
        return False
    if instance.host == host:
        return False
    try:
        migrations = _migrations(ctxt, uuid)
    except Exception as e:
        LOG.warning('Cannot read the migrations of instance %s: %s', uuid, e)
        return False
    return not any(m.status not in FINAL_MIGRATION_STATUSES and
                   host in (m.source_compute, m.dest_compute)
                   for m in migrations)
