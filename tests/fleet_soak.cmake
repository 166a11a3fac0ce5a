# The fleet tier's failover runs (Sentinel, Cluster with replicas) repeated against real
# servers: a soak, registered with -DKJIT_SOAK_TESTS=ON (minutes).
if(KJIT_SOAK_TESTS AND TARGET test_fleet_ha)
  add_test(NAME soak_fleet_failover
    COMMAND test_fleet_ha --gtest_filter=FleetHaTest.SoakFailoversRepeated)
  set_tests_properties(soak_fleet_failover PROPERTIES TIMEOUT 1800 LABELS soak
    ENVIRONMENT "KJIT_SOAK_TESTS=1;KJIT_WORKER_IDLE_S=20")
endif()
