# Turn the operator page's files into C arrays (cmake -P): -DOUT=file.c -DFILES="a|b" -DNAMES="x|y".
# Each file F becomes `const unsigned char NAME[]` and `const unsigned long NAME_len` in OUT.
# Run by src/sched/CMakeLists.txt whenever one of the files changes; nothing is fetched at run time.
string(REPLACE "|" ";" FILES "${FILES}")
string(REPLACE "|" ";" NAMES "${NAMES}")
set(text "/* Generated from src/sched/ui/ by src/sched/ui/embed.cmake; do not edit. */\n")
list(LENGTH FILES n)
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  list(GET FILES ${i} f)
  list(GET NAMES ${i} name)
  file(READ ${f} hex HEX)
  string(LENGTH "${hex}" hl)
  math(EXPR bytes "${hl} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
  string(APPEND text "extern const unsigned char ${name}[];\nextern const unsigned long ${name}_len;\n"
                     "const unsigned char ${name}[] = {${body}0};\nconst unsigned long ${name}_len = ${bytes};\n")
endforeach()
file(WRITE ${OUT}.tmp "${text}")
file(RENAME ${OUT}.tmp ${OUT})
