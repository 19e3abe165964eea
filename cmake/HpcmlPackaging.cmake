# Install rules and the Debian packages (CPack's DEB generator):
#   hpcml-guard  compute and login nodes: hpcml_guard.so in Slurm's plugin
#                directory, an inactive plugstack.conf.d snippet (a conffile),
#                hpcml-audit, the example policy, man pages 8, 5 and 1
#   hpcml-tools  hpcml-fcache, hpcml-train, hpcml-infer, hpcml-plan,
#                hpcml-cost, hpcml-mpi-probe (and hpcml-gpu-probe when the
#                CUDA backend is built), man pages 1 and 5
#   cmake --build build/default && (cd build/default && cpack)    ->  hpcml-guard_<v>_<arch>.deb ...
# Why CPack and not a debian/ directory: docs/install.md ("Why CPack").
# Included by the top-level CMakeLists.txt after every target exists.
include(GNUInstallDirs)

# Slurm's version from its headers: a SPANK plugin is loaded only by the
# Slurm release it was built against (plugin_version = SLURM_VERSION_NUMBER).
file(STRINGS ${HPCML_SLURM_INCLUDE}/slurm/slurm_version.h _slurm_version_line
  REGEX "^#define SLURM_VERSION_NUMBER ")
string(REGEX MATCH "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])" _ "${_slurm_version_line}")
math(EXPR HPCML_SLURM_MAJOR "0x${CMAKE_MATCH_1}")
math(EXPR HPCML_SLURM_MINOR "0x${CMAKE_MATCH_2}")
math(EXPR _slurm_next_minor "${HPCML_SLURM_MINOR} + 1")
set(_slurm_release "${HPCML_SLURM_MAJOR}.${HPCML_SLURM_MINOR}")
if(HPCML_SLURM_MINOR LESS 10)
  set(_slurm_release "${HPCML_SLURM_MAJOR}.0${HPCML_SLURM_MINOR}")
endif()
set(_slurm_next "${HPCML_SLURM_MAJOR}.${_slurm_next_minor}")
if(_slurm_next_minor LESS 10)
  set(_slurm_next "${HPCML_SLURM_MAJOR}.0${_slurm_next_minor}")
endif()

# Slurm's plugin directory (its compiled-in PluginDir): where Debian's
# slurm-wlm-basic-plugins put its plugins, beside libslurm.
get_filename_component(_slurm_libdir ${HPCML_SLURM_LIBRARY} DIRECTORY)
find_path(HPCML_SLURM_PLUGIN_DIR NAMES spank_pbs.so select_cons_tres.so
  PATHS ${_slurm_libdir}/slurm-wlm ${_slurm_libdir}/slurm NO_DEFAULT_PATH
  DOC "Slurm's plugin directory (PluginDir), where hpcml_guard.so is installed")
if(NOT HPCML_SLURM_PLUGIN_DIR)
  set(HPCML_SLURM_PLUGIN_DIR ${_slurm_libdir}/slurm-wlm CACHE PATH
    "Slurm's plugin directory (PluginDir), where hpcml_guard.so is installed" FORCE)
  message(STATUS "hpcml: no Slurm plugins found beside ${HPCML_SLURM_LIBRARY}; "
    "installing the guard into ${HPCML_SLURM_PLUGIN_DIR}")
endif()
set(HPCML_PACKAGE_MAINTAINER "hpcml maintainers <hpcml@example.org>" CACHE STRING
  "Maintainer field of the Debian packages (name <address>)")

set(_guard_doc ${CMAKE_INSTALL_DATAROOTDIR}/doc/hpcml-guard)
set(_tools_doc ${CMAKE_INSTALL_DATAROOTDIR}/doc/hpcml-tools)
set(_pkg ${PROJECT_BINARY_DIR}/packaging)

# ---- hpcml-guard
# A plugin is data to dlopen, not a program: 0644 as Slurm's own.
install(TARGETS hpcml_guard LIBRARY DESTINATION ${HPCML_SLURM_PLUGIN_DIR} COMPONENT guard
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(TARGETS hpcml-audit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT guard)
# The plugstack.conf.d snippet, its line commented out: the admin enables
# it. A conffile (below), so the admin's edit survives upgrades and removal.
configure_file(${PROJECT_SOURCE_DIR}/packaging/hpcml_guard.conf.in ${_pkg}/hpcml_guard.conf @ONLY)
install(FILES ${_pkg}/hpcml_guard.conf DESTINATION /etc/slurm/plugstack.conf.d COMPONENT guard)
file(WRITE ${_pkg}/guard/conffiles "/etc/slurm/plugstack.conf.d/hpcml_guard.conf\n")
# The policy is the admin's own file (/etc/hpcml/policy.toml): the package
# ships only the example, so it can never overwrite or remove a policy.
install(FILES ${PROJECT_SOURCE_DIR}/examples/guard/policy.toml
  ${PROJECT_SOURCE_DIR}/examples/guard/plugstack.conf
  ${PROJECT_SOURCE_DIR}/examples/guard/job_submit.lua
  ${PROJECT_SOURCE_DIR}/examples/guard/train-guarded.sbatch
  DESTINATION ${_guard_doc}/examples COMPONENT guard)
install(FILES ${PROJECT_SOURCE_DIR}/docs/guard.md ${PROJECT_SOURCE_DIR}/docs/install.md
  DESTINATION ${_guard_doc} COMPONENT guard)

# ---- hpcml-tools
set(_tools hpcml-fcache hpcml-train hpcml-infer hpcml-plan hpcml-cost hpcml-mpi-probe)
if(TARGET hpcml-gpu-probe)
  list(APPEND _tools hpcml-gpu-probe)
endif()
install(TARGETS ${_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/examples/accounting/prices.toml
  ${PROJECT_SOURCE_DIR}/examples/trainer/train.sbatch
  ${PROJECT_SOURCE_DIR}/examples/trainer/train-preemptible.sbatch
  ${PROJECT_SOURCE_DIR}/examples/trainer/train-gbdt.sbatch
  ${PROJECT_SOURCE_DIR}/examples/inference/score.sbatch
  DESTINATION ${_tools_doc}/examples COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/examples/python/train_ddp.py
  ${PROJECT_SOURCE_DIR}/examples/python/train-ddp.sbatch
  ${PROJECT_SOURCE_DIR}/examples/python/train_xgboost.py
  ${PROJECT_SOURCE_DIR}/examples/python/train-xgboost.sbatch
  DESTINATION ${_tools_doc}/examples/python COMPONENT tools)
foreach(doc accounting featurecache trainer inference topology checkpoint python)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/${doc}.md DESTINATION ${_tools_doc} COMPONENT tools)
endforeach()

# ---- both: copyright and changelog, as Debian policy wants them.
configure_file(${PROJECT_SOURCE_DIR}/packaging/changelog.in ${_pkg}/changelog @ONLY)
add_custom_command(OUTPUT ${_pkg}/changelog.gz
  COMMAND sh -c "gzip -9n -c '${_pkg}/changelog' > '${_pkg}/changelog.gz'"
  DEPENDS ${_pkg}/changelog VERBATIM)
add_custom_target(package_changelog ALL DEPENDS ${_pkg}/changelog.gz)
foreach(c guard tools)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright ${_pkg}/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/hpcml-${c} COMPONENT ${c})
endforeach()

# ---- CPack: one .deb per component.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hpcml)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HPCML_PACKAGE_MAINTAINER}")
# The packages install under /usr whatever CMAKE_INSTALL_PREFIX (/usr/local
# by default, for `cmake --install`); absolute destinations (Slurm's plugin
# directory, /etc) go into the package as they are (DESTDIR install).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL guard tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SOURCE hpcml)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)  # conffiles 0644, as dpkg wants
# dpkg-shlibdeps turns the binaries' libraries into Depends (libc6,
# libhdf5-103-1, libopenmpi3 ...). Libraries no Debian package owns (the
# CUDA toolkit in /usr/local/cuda, for a build with the CUDA backend) are
# not declared: docs/install.md.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_GUARD_PACKAGE_NAME hpcml-guard)
set(CPACK_DEBIAN_GUARD_PACKAGE_SECTION admin)
# Its plugstack.conf (which includes plugstack.conf.d) and the Slurm release
# the plugin was built for.
set(CPACK_DEBIAN_GUARD_PACKAGE_DEPENDS
  "slurm-wlm-basic-plugins (>= ${_slurm_release}), slurm-wlm-basic-plugins (<< ${_slurm_next})")
set(CPACK_DEBIAN_GUARD_PACKAGE_CONTROL_EXTRA ${_pkg}/guard/conffiles)
set(CPACK_DEBIAN_GUARD_DESCRIPTION
  "Slurm SPANK plugin for data residency and ML roles
The hpcml guard decides at every job step launch, on every node, whether
this user may run this job with these datasets on this node: residency
zones, roles bound to users, groups and accounts, dataset classifications.
Allowed steps see only their datasets, read-only; every decision goes to a
hash-chained audit log, checked by hpcml-audit. The plugstack.conf.d line
is installed commented out: see /usr/share/doc/hpcml-guard/install.md.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME hpcml-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
# The feature store writes blosc-compressed datasets through HDF5's filter
# plugin; MPI programs start under srun or mpirun; hpcml-train --model gbdt
# on more than one rank runs XGBoost's tracker from python3-xgboost. The
# Python package's extension is built for Debian 12's Python 3.11 and hands
# out NumPy arrays (pandas only for to_pandas and ingest: a Recommends;
# python3-torch for hpcml.init_torch and the example DDP job: a Suggests).
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
  "hdf5-filter-plugin-blosc-serial, python3 (>= 3.11), python3 (<< 3.12), python3-numpy")
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS
  "slurm-client, openmpi-bin, python3-xgboost, python3-pandas")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "python3-torch")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
  "hpcml command-line tools: feature store, MPI trainer, inference, cost
hpcml-fcache (versioned HDF5 feature sets with lineage and residency
checks), hpcml-train (data, pipeline and tensor parallel training over MPI
with checkpoints and requeue), hpcml-infer (batch scoring, ONNX export),
hpcml-plan (topology-aware placement), hpcml-cost (GPU cost reports over
sacct) and hpcml-mpi-probe.")

include(CPack)
