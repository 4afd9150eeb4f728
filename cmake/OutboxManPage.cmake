# cmake -P: one man page, made from a program's --help by help2man, with the --help
# of each of its commands in a section COMMANDS (help2man reads only the top-level
# --help), then compressed as Debian ships man pages (gzip -9n: no name or time stamp
# in the header, so the same input gives the same bytes).
#   cmake -DPROGRAM=path -DNAME=outbox-relay -DSUMMARY="..." -DVERSION=0.1.0
#         -DCOMMANDS=run,migrate -DEXTRA=extra.h2m -DHELP2MAN=... -DGZIP=...
#         -DOUT=outbox-relay.1.gz -P OutboxManPage.cmake
# EXTRA: help2man's include file with the hand-written sections (FILES, SEE ALSO...).
# The page's date comes from SOURCE_DATE_EPOCH when set (help2man honours it).
foreach(var PROGRAM NAME SUMMARY VERSION EXTRA HELP2MAN GZIP OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "OutboxManPage.cmake: -D${var}=... is missing")
  endif()
endforeach()

# Text as it is printed, in roff: no request or escape is read from it.
function(roff_literal text out_var)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")  # a minus (option dashes), not a hyphen
  # a request (. or ') or, for help2man's include file, a section ([NAME]) at a line's start
  string(REGEX REPLACE "(^|\n)([.'[])" "\\1\\\\&\\2" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

file(READ "${EXTRA}" include_text)
string(REPLACE "," ";" COMMANDS "${COMMANDS}")  # commas: a list survives the command line
if(COMMANDS)
  string(APPEND include_text "\n[COMMANDS]\n"
         "Each command's own help (${NAME} COMMAND --help), as the program prints it:\n")
  foreach(command IN LISTS COMMANDS)
    execute_process(COMMAND "${PROGRAM}" ${command} --help RESULT_VARIABLE rc
                    OUTPUT_VARIABLE help ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR help STREQUAL "")
      message(FATAL_ERROR "${NAME} ${command} --help: exit ${rc}, no help text: ${err}")
    endif()
    string(REPLACE "${PROGRAM}" "${NAME}" help "${help}")  # CLI11 prints argv[0] as run
    roff_literal("${help}" help)
    string(APPEND include_text ".SS ${command}\n.nf\n${help}.fi\n")
  endforeach()
endif()
# help2man's input and output beside the build's man folder, not in it (a MANPATH)
get_filename_component(work_dir "${OUT}/../../../man-work" ABSOLUTE)
file(MAKE_DIRECTORY "${work_dir}")
set(include_file "${work_dir}/${NAME}.h2m")
set(page "${work_dir}/${NAME}.1")
file(WRITE "${include_file}" "${include_text}")

execute_process(COMMAND "${HELP2MAN}" --no-info --section=1 --name=${SUMMARY} --version-string=${VERSION}
                        --source=outbox-relay --manual=outbox-relay --include=${include_file}
                        --output=${page} "${PROGRAM}"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man ${PROGRAM}: exit ${rc}: ${err}")
endif()
execute_process(COMMAND "${GZIP}" -9n -c "${page}" OUTPUT_FILE "${OUT}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip ${page}: exit ${rc}: ${err}")
endif()
