# The command line's sources but main.cpp (run_cli.cpp holds the program; fuzz/ links them too).
set(ROOFSIM_CLI_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/run_cli.cpp ${CMAKE_CURRENT_LIST_DIR}/cli_common.cpp ${CMAKE_CURRENT_LIST_DIR}/specs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/roofline.cpp ${CMAKE_CURRENT_LIST_DIR}/kernel.cpp ${CMAKE_CURRENT_LIST_DIR}/predict.cpp
  ${CMAKE_CURRENT_LIST_DIR}/validate.cpp ${CMAKE_CURRENT_LIST_DIR}/compare.cpp ${CMAKE_CURRENT_LIST_DIR}/survey.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sweep.cpp ${CMAKE_CURRENT_LIST_DIR}/models.cpp)
