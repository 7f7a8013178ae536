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

"""``rdt-virt-nova-loader``: make ``compute_driver = rdtvirt...`` loadable.

Nova imports its compute driver as ``'nova.virt.' + compute_driver``, so the
driver needs a loader package inside Nova's ``nova.virt`` package:
``nova.virt.rdtvirt``, which re-exports
:class:`nova_plugin.virt.driver.RDTLibvirtDriver`.

* A normal install (``pip install rdt-virt``, a wheel or an sdist) ships
  ``nova/virt/rdtvirt/__init__.py`` and pip places it in Nova's package
  directory; ``pip uninstall`` removes it again. Nothing else to do.
* An editable install (``pip install -e``, which is what DevStack does)
  cannot place files inside another distribution's package, so the loader
  is missing. ``rdt-virt-nova-loader install`` writes it there, marked as
  its own, and ``rdt-virt-nova-loader remove`` deletes it.

``rdt-virt-nova-loader check`` imports the loader as Nova would and says
where it comes from; it exits 1 when Nova could not load the driver.
"""

import argparse
import importlib
import importlib.util
import os
import sys

from rdt_virt.cmd import output

PACKAGE = 'rdtvirt'
MODULE = 'nova.virt.' + PACKAGE
COMPUTE_DRIVER = PACKAGE + '.RDTLibvirtDriver'
MARKER = '# Written by rdt-virt-nova-loader; "rdt-virt-nova-loader remove" ' \
    'deletes it.'

LOADER = '''%s
"""Loader of rdt-virt's libvirt driver (compute_driver = %s)."""

from nova_plugin.virt.driver import RDTLibvirtDriver

__all__ = ['RDTLibvirtDriver']
''' % (MARKER, COMPUTE_DRIVER)


def nova_virt_dir():
    """Directory of the installed ``nova.virt`` package."""
    spec = importlib.util.find_spec('nova.virt')
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError('Nova is not installed in this Python '
                           'environment (%s)' % sys.prefix)
    return list(spec.submodule_search_locations)[0]


def loader_path(virt_dir=None):
    """Where the loader package's ``__init__.py`` goes."""
    return os.path.join(virt_dir or nova_virt_dir(), PACKAGE, '__init__.py')


def written_by_us(path):
    """True if ``path`` is a loader that this command wrote."""
    try:
        with open(path) as f:
            return f.readline().rstrip('\n') == MARKER
    except OSError:
        return False


def find_loader():
    """Path of the module Nova would import, or None if there is none."""
    importlib.invalidate_caches()
    try:
        spec = importlib.util.find_spec(MODULE)
    except ImportError:
        return None
    return spec.origin if spec is not None else None


def install(virt_dir=None):
    """Write the loader unless a normal install already provides one.

    :returns: a sentence saying what was done.
    """
    path = loader_path(virt_dir)
    existing = find_loader() if virt_dir is None else None
    if existing and not written_by_us(existing):
        return '%s is provided by the installed package at %s' % (
            MODULE, existing)
    if os.path.exists(path) and not written_by_us(path):
        return '%s exists and was not written by this command; left alone' % (
            path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(LOADER)
    os.replace(tmp, path)
    return 'wrote %s' % path


def remove(virt_dir=None):
    """Delete a loader this command wrote; leave any other alone."""
    path = loader_path(virt_dir)
    if not written_by_us(path):
        return 'nothing to remove at %s' % path
    os.unlink(path)
    cache = os.path.join(os.path.dirname(path), '__pycache__')
    if os.path.isdir(cache):
        for name in os.listdir(cache):
            if name.startswith('__init__.'):
                os.unlink(os.path.join(cache, name))
        _rmdir(cache)
    _rmdir(os.path.dirname(path))
    return 'removed %s' % path


def _rmdir(path):
    try:
        os.rmdir(path)
    except OSError:
        pass


def check():
    """Import the driver the way Nova does; raise if that fails."""
    from oslo_utils import importutils
    cls = importutils.import_class('nova.virt.' + COMPUTE_DRIVER)
    return 'compute_driver = %s loads %s.%s from %s' % (
        COMPUTE_DRIVER, cls.__module__, cls.__name__, find_loader())


@output.quiet
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='rdt-virt-nova-loader',
        description='Install, remove or check the nova.virt.%s loader '
                    'that lets nova-compute load rdt-virt\'s driver with '
                    'compute_driver = %s.' % (PACKAGE, COMPUTE_DRIVER))
    parser.add_argument('action', choices=('install', 'remove', 'check'))
    args = parser.parse_args(argv)
    try:
        print({'install': install, 'remove': remove,
               'check': check}[args.action]())
    except Exception as e:
        print('rdt-virt-nova-loader %s failed: %s' % (args.action, e),
              file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
