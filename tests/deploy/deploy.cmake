# The agent image and the shell scripts (tests/deploy): what can be checked here without a
# container engine or a GPU. shellcheck comes from scripts/install-deps; without it the
# shellcheck test fails saying so.
add_test(NAME shellcheck
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/shellcheck_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(shellcheck PROPERTIES LABELS deploy TIMEOUT 120)

# deploy/prometheus: the alert and recording rules load, every alert fires and stays quiet as
# its unit tests say (promtool, Debian's prometheus package), and they read only series serve
# writes. About a second.
add_test(NAME prometheus_rules
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/prometheus_rules_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(prometheus_rules PROPERTIES LABELS deploy TIMEOUT 60 COST 1)

# The entrypoint in a scratch root with a fake cuzk and a fake agent: environment, restarts
# with backoff, logs, SIGTERM, --detach (vast's onstart), one supervisor at a time. ~20 s.
add_test(NAME agent_image_entrypoint
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/entrypoint_test.sh
                 ${CMAKE_SOURCE_DIR}/deploy/agent-image/entrypoint.sh)
set_tests_properties(agent_image_entrypoint PROPERTIES LABELS deploy TIMEOUT 300 COST 13)

# The Dockerfile's pins and layout; scripts/build-agent-image against a fake docker.
add_test(NAME agent_image_dockerfile
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/agent_image_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(agent_image_dockerfile PROPERTIES LABELS deploy TIMEOUT 120)

# Every REQUIRED find_package / pkg_check_modules mapped to its package in scripts/install-deps
# and in the Dockerfile's agent-build stage; the cuzk daemon of the pinned curio commit.
add_test(NAME agent_image_build_packages
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/deploy/build_packages_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(agent_image_build_packages PROPERTIES LABELS deploy TIMEOUT 60)
