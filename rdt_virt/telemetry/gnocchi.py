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

"""Gnocchi resource definitions of rdt-virt's meters for Ceilometer.

Ceilometer's Gnocchi publisher stores a sample only when its meter appears
in the resource definitions it loaded, and it loads exactly one file: the
``resources_definition_file`` of its URL (``gnocchi_resources.yaml`` by
default), looked up in Ceilometer's configuration directories, else the
copy packaged with Ceilometer. Since Ceilometer 24.0.0 that copy no longer
lists ``memory.bandwidth.total``, ``memory.bandwidth.local`` or
``cpu_l3_cache``. ``rdt-virt-gnocchi-resources`` merges rdt-virt's
definitions (``etc/ceilometer/gnocchi_resources_rdt.yaml``) into a base
file, by default the deployment's own file when it exists and Ceilometer's
packaged one otherwise, so that every other meter keeps its definition::

    rdt-virt-gnocchi-resources --output /etc/ceilometer/gnocchi_resources.yaml

Merging is idempotent and never changes a definition the base already has
for one of these metrics (an operator's archive policy wins).
"""

import argparse
import importlib.util
import os
import sys
import tempfile

import yaml

from rdt_virt.cmd import output

FRAGMENT = 'gnocchi_resources_rdt.yaml'
CEILOMETER_DEFAULT = os.path.join('publisher', 'data',
                                  'gnocchi_resources.yaml')


class DefinitionsError(Exception):
    pass


def fragment_path():
    """rdt-virt's definitions: from the source tree or the installed data."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(here, '..', '..', 'etc', 'ceilometer', FRAGMENT),
        os.path.join(sys.prefix, 'etc', 'rdt-virt', 'ceilometer', FRAGMENT),
    ]
    for path in candidates:
        if os.path.isfile(path):
            return os.path.normpath(path)
    raise DefinitionsError('%s not found in %s' % (
        FRAGMENT, ', '.join(os.path.normpath(p) for p in candidates)))


def ceilometer_default_path():
    """The gnocchi_resources.yaml packaged with the installed Ceilometer."""
    spec = importlib.util.find_spec('ceilometer')
    if spec is None or not spec.submodule_search_locations:
        raise DefinitionsError(
            'Ceilometer is not installed here; name the base file with '
            '--base')
    return os.path.join(list(spec.submodule_search_locations)[0],
                        CEILOMETER_DEFAULT)


def load(path):
    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not isinstance(
            data.get('resources'), list):
        raise DefinitionsError('%s has no list of resources' % path)
    return data


def merge(base, fragment):
    """Add the fragment's metrics to the base's resources; pure.

    Returns (merged document, names of the metrics added). A resource type
    the base lacks is appended whole; a metric the base already defines,
    for that resource type or any other, is left as it is (Ceilometer maps
    each metric to one resource type).
    """
    merged = dict(base)
    resources = [dict(r) for r in base['resources']]
    merged['resources'] = resources
    known = {m for r in resources for m in (r.get('metrics') or {})}
    added = []
    for extra in fragment['resources']:
        rtype = extra['resource_type']
        new = {name: value
               for name, value in (extra.get('metrics') or {}).items()
               if name not in known}
        if not new:
            continue
        target = next((r for r in resources
                       if r.get('resource_type') == rtype), None)
        if target is None:
            target = dict(extra, metrics={})
            resources.append(target)
        target['metrics'] = dict(target.get('metrics') or {}, **new)
        known.update(new)
        added.extend(new)
    return merged, added


def write_atomically(path, data):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.gnocchi-resources-')
    try:
        with os.fdopen(fd, 'w') as f:
            f.write('# Ceilometer Gnocchi resource definitions with '
                    'rdt-virt\'s meters\n# (written by '
                    'rdt-virt-gnocchi-resources).\n')
            yaml.safe_dump(data, f, default_flow_style=False,
                           sort_keys=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@output.quiet
def main(argv=None, out=None):
    out = out or sys.stdout
    parser = argparse.ArgumentParser(
        prog='rdt-virt-gnocchi-resources',
        description='Merge the Gnocchi resource definitions of rdt-virt\'s '
                    'meters into Ceilometer\'s gnocchi_resources.yaml.')
    parser.add_argument('--output', required=True,
                        help='file to write, e.g. '
                             '/etc/ceilometer/gnocchi_resources.yaml')
    parser.add_argument('--base', help='definitions to start from (default: '
                        'the output file if it exists, else the one '
                        'packaged with Ceilometer)')
    parser.add_argument('--definitions', help='rdt-virt\'s definitions '
                        '(default: the installed %s)' % FRAGMENT)
    args = parser.parse_args(argv)
    try:
        base_path = args.base or (
            args.output if os.path.exists(args.output)
            else ceilometer_default_path())
        merged, added = merge(load(base_path),
                              load(args.definitions or fragment_path()))
        if added or base_path != args.output:
            write_atomically(args.output, merged)
    except (OSError, yaml.YAMLError, DefinitionsError) as e:
        print('rdt-virt-gnocchi-resources: %s' % e, file=sys.stderr)
        return 1
    print('%s: %s from %s' % (
        args.output, 'added ' + ', '.join(added) if added
        else 'already defines every rdt-virt meter', base_path), file=out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
