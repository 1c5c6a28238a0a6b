# --svg writes atomically (roofsim roofline --svg):
#   cmake -DROOFSIM=path -DWORK=dir -P atomic_svg.cmake
# 1. a symbolic link as the target: the file it points at is replaced, the link kept;
# 2. a write that fails (the file size limit, ulimit -f, hit mid-write): exit 1 naming the file, the
#    old file untouched, no temporary file left.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

# 1. through a link (a relative one, resolved from the link's directory)
file(WRITE "${WORK}/real.svg" "old\n")
file(CREATE_LINK "real.svg" "${WORK}/link.svg" SYMBOLIC)
execute_process(COMMAND "${ROOFSIM}" roofline --gpu rtx-a6000 --svg "${WORK}/link.svg"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code STREQUAL "0")
  message(FATAL_ERROR "through a link: exit code ${code}, expected 0\n${out}${err}")
endif()
if(NOT IS_SYMLINK "${WORK}/link.svg")
  message(FATAL_ERROR "the link ${WORK}/link.svg was replaced by a file")
endif()
file(READ "${WORK}/real.svg" text)
if(NOT text MATCHES "^<svg .*DRAM 768 GB/s.*</svg>")
  message(FATAL_ERROR "the file the link points at was not replaced by the SVG:\n${text}")
endif()

# 2. a failed write: the limit (1 block of 512 or 1024 bytes) is far below the SVG's size; the
#    signal the limit sends is ignored, so the write itself fails (EFBIG)
find_program(SH sh REQUIRED)
file(WRITE "${WORK}/kept.svg" "old\n")
execute_process(COMMAND "${SH}" -c "trap '' XFSZ; ulimit -f 1 && exec \"$0\" \"$@\""
                        "${ROOFSIM}" roofline --gpu rtx-a6000 --svg "${WORK}/kept.svg"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code STREQUAL "1")
  message(FATAL_ERROR "a failed write: exit code ${code}, expected 1\n${out}${err}")
endif()
string(FIND "${err}" "roofsim: error: ${WORK}/kept.svg: write failed: File too large" at)
if(at EQUAL -1)
  message(FATAL_ERROR "a failed write: the message does not name the file and the fault:\n${out}${err}")
endif()
file(READ "${WORK}/kept.svg" text)
if(NOT text STREQUAL "old\n")
  message(FATAL_ERROR "a failed write changed the old file:\n${text}")
endif()
file(GLOB left "${WORK}/.kept.svg*")
if(left)
  message(FATAL_ERROR "a failed write left a temporary file: ${left}")
endif()
file(REMOVE_RECURSE "${WORK}")
