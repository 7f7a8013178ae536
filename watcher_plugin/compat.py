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

"""Where the Watcher releases rdt-virt supports (14 to 17) differ.

Each shim names the release it exists for: delete it when that release
leaves the support matrix (``doc/source/install/support-matrix.rst``).
"""


def server_uuid(server):
    """The uuid of a server from ``NovaHelper.get_instance_list()``.

    Watcher 16 (2026.1) and later list Watcher's own Server objects, which
    carry ``uuid``; Watcher 14 and 15 (2025.1, 2025.2) list novaclient's,
    which carry it as ``id``. Delete the fallback when 2025.2 leaves the
    matrix. Both carry the embedded ``flavor`` as a dict.
    """
    uuid = getattr(server, 'uuid', None)
    return server.id if uuid is None else uuid


def datasource_helper(name, osc):
    """Watcher's helper of datasource ``name``, built as Watcher builds it.

    The classes and constructors of ``DataSourceManager``: Gnocchi and
    Aetos authenticate through ``osc``'s Keystone session, Prometheus reads
    ``[prometheus_client]``. Aetos exists from Watcher 15 (2025.2): on 14
    (2025.1) there is no such datasource; delete the check when 2025.1
    leaves the matrix. The Prometheus datasource is deprecated since
    Watcher 16 (2026.1) and marked for removal in 2027.1.

    :returns: the helper, or None where this Watcher has no such
        datasource.
    :raises: whatever the helper's constructor raises (its options unset,
        the server unreachable).
    """
    if name == 'gnocchi':
        from watcher.decision_engine.datasources import gnocchi
        return gnocchi.GnocchiHelper(osc=osc)
    if name == 'prometheus':
        try:
            from watcher.decision_engine.datasources import prometheus
        except ImportError:
            return None
        return prometheus.PrometheusHelper()
    if name == 'aetos':
        try:
            from watcher.decision_engine.datasources import aetos
        except ImportError:
            return None
        return aetos.AetosHelper(osc=osc)
    return None


def host_label_name(helper):
    """The host label a Prometheus or Aetos helper queries by.

    ``[prometheus_client]`` or ``[aetos_client] fqdn_label``, as the
    helper read it: the attribute ``prometheus_fqdn_label`` in Watcher 14
    to 17.
    """
    return helper.prometheus_fqdn_label


def host_label_value(helper, hostname):
    """The value of the host label for a hypervisor hostname, or None.

    Watcher's own resolution (the label's value itself, else the value
    whose part before the first dot is the hostname; the targets are
    listed again when neither matches), private in Watcher 14 to 17
    (``_resolve_prometheus_instance_label``) but the same there.
    """
    return helper._resolve_prometheus_instance_label(hostname)
