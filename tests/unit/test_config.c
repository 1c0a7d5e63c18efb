/*
 * test_config.c - the project file's parser (cli/config_file.c): what a
 * traceml.yaml or a pyproject.toml becomes, and the one line each
 * malformed file gets, naming the file and the line as an editor counts.
 */
#include <string.h>

#include "../../cli/cli.h"
#include "harness.h"

/* Parses text as file `path`: 0 or -1 (c released by the caller). */
static int parse(tml_cli_config *c, const char *path, const char *text)
{
    return tml__cli_config_parse(c, path, text, strlen(text));
}

static void test_yaml_options_and_lines(void)
{
    tml_cli_config c;
    const char *y = "# defaults\n\nmode: cli   # live\n\nlogs_dir: 'runs'\n"
                    "html-report: true\nthresholds:\n\n  input_warn: 0.15\n";
    CHECK_EQ_INT(parse(&c, "traceml.yaml", y), 0);
    CHECK_EQ_INT(c.n, 3);
    CHECK_STR(c.argv[0], "--mode=cli");
    CHECK_STR(c.argv[1], "--logs-dir=runs");
    CHECK_STR(c.argv[2], "--html-report=true");
    CHECK(c.argv[3] == NULL);
    /* every line counts: blank and comment lines too */
    CHECK_EQ_INT(c.line[0], 3);
    CHECK_EQ_INT(c.line[1], 5);
    CHECK_EQ_INT(c.line[2], 6);
    CHECK_STR(c.thresholds, "input_warn=0.15");
    CHECK_EQ_INT(c.thresholds_line, 9);
    tml__cli_config_release(&c);
    /* CRLF line ends */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "\r\n\r\nmode: cli\r\n"), 0);
    CHECK_EQ_INT(c.n, 1);
    CHECK_STR(c.argv[0], "--mode=cli");
    CHECK_EQ_INT(c.line[0], 3);
    tml__cli_config_release(&c);
}

static void test_bom_is_skipped(void)
{
    tml_cli_config c;
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "\xef\xbb\xbfmode: cli\n"), 0);
    CHECK_EQ_INT(c.n, 1);
    CHECK_STR(c.argv[0], "--mode=cli");
    CHECK_EQ_INT(c.line[0], 1);
    tml__cli_config_release(&c);
    CHECK_EQ_INT(parse(&c, "pyproject.toml", "\xef\xbb\xbf[tool.traceml]\nmode = \"cli\"\n"),
                 0);
    CHECK_EQ_INT(c.n, 1);
    CHECK_STR(c.argv[0], "--mode=cli");
    tml__cli_config_release(&c);
    /* UTF-16 (NUL bytes): named, not read as garbage keys */
    CHECK_EQ_INT(tml__cli_config_parse(&c, "traceml.yaml", "\n\xff\xfem\0o\0", 7), -1);
    CHECK(strstr(c.err, "traceml.yaml:2: a NUL byte") == c.err);
    tml__cli_config_release(&c);
}

static void test_duplicate_keys(void)
{
    tml_cli_config c;
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "mode: cli\n\nmode: dashboard\n"), -1);
    CHECK_STR(c.err, "traceml.yaml:3: 'mode' is set twice (also on traceml.yaml:1); say it "
                     "once");
    tml__cli_config_release(&c);
    /* logs_dir is logs-dir */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "logs-dir: a\nlogs_dir: b\n"), -1);
    CHECK(strstr(c.err, "traceml.yaml:2: 'logs_dir' is set twice (also on traceml.yaml:1)"));
    tml__cli_config_release(&c);
    /* a flag set false and then true */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "html-report: false\nhtml-report: true\n"), -1);
    tml__cli_config_release(&c);
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "thresholds:\n  input_warn: 0.1\n  input_warn: 0.2\n"),
                 -1);
    CHECK(strstr(c.err, "traceml.yaml:3: 'input_warn' is set twice (also on traceml.yaml:2)"));
    tml__cli_config_release(&c);
    /* the same name in two maps is two keys */
    CHECK_EQ_INT(parse(&c, "pyproject.toml", "[tool.traceml]\nmode = \"cli\"\n[tool.other]\n"
                                             "mode = 1\n[tool.traceml]\nmode = \"summary\"\n"),
                 -1);
    CHECK(strstr(c.err, "pyproject.toml:6: 'mode' is set twice (also on pyproject.toml:2)"));
    tml__cli_config_release(&c);
}

static void test_errors_name_file_and_line(void)
{
    static const struct {
        const char *path, *text, *err;
    } cases[] = {
        {"traceml.yaml", "\n\nmode cli\n", "traceml.yaml:3: expected key : value"},
        {"traceml.yaml", "mode: cli\n\n  x: 1\n", "traceml.yaml:3: only 'thresholds' holds a map"},
        {"traceml.yaml", "\n: cli\n", "traceml.yaml:2: a value without a key"},
        {"traceml.yaml", "# a\nmode: [cli]\n", "traceml.yaml:2: 'mode': lists and inline"},
        {"traceml.yaml", "\nmo de: cli\n", "traceml.yaml:2: 'mo de' is not a key"},
        {"traceml.yaml", "thresholds:\n\n  input_warn: 2\n",
         "traceml.yaml:3: threshold input_warn: '2' is not a known key"},
        {"traceml.yaml", "thresholds:\n  nope: 0.1\n", "traceml.yaml:2: threshold nope:"},
        {"traceml.yaml", "thresholds:\n  input_warn: 0.5\n  input_crit: 0.4\n",
         "traceml.yaml:2: thresholds: each *_warn must be at most its *_crit"},
        {"pyproject.toml", "[project]\nname = \"x\"\n\n[tool.traceml]\n\nmode\n",
         "pyproject.toml:6: expected key = value"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tml_cli_config c;
        CHECK_EQ_INT(parse(&c, cases[i].path, cases[i].text), -1);
        if (strncmp(c.err, cases[i].err, strlen(cases[i].err)) != 0) {
            fprintf(stderr, "case %zu: got '%s'\n", i, c.err);
            CHECK(0);
        }
        tml__cli_config_release(&c);
    }
}

static void test_warn_and_crit_on_two_lines(void)
{
    tml_cli_config c;
    /* a warn above the default crit, raised by the next line: fine */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "thresholds:\n  input_warn: 0.5\n  input_crit: 0.6\n"),
                 0);
    CHECK_STR(c.thresholds, "input_warn=0.5,input_crit=0.6");
    tml__cli_config_release(&c);
}

/* TraceML 0.5.0's `guard:` block is read, not refused: kept as JSON with
 * the scalars' types, the other options around it as before (issue 45). */
static void test_guard_block(void)
{
    tml_cli_config c;
    const char *y = "mode: cli\nguard:\n  schema_version: 1\n  workload:\n"
                    "    name: \"resnet 50\"   # a comment\n    parameters:\n"
                    "      batch: 32\n      amp: true\n      tag: '32'\n      lr: 1e-3\n"
                    "  measurement:\n    start_step: 10\n    completed_steps: 50\n"
                    "thresholds:\n  input_warn: 0.15\n";
    CHECK_EQ_INT(parse(&c, "traceml.yaml", y), 0);
    CHECK_STR(c.guard, "{\"schema_version\":1,\"workload\":{\"name\":\"resnet 50\","
              "\"parameters\":{\"batch\":32,\"amp\":true,\"tag\":\"32\",\"lr\":1e-3}},"
              "\"measurement\":{\"start_step\":10,\"completed_steps\":50}}");
    CHECK_EQ_INT(c.n, 1);
    CHECK_STR(c.thresholds, "input_warn=0.15");
    tml__cli_config_release(&c);
    /* a guard at the end of the file */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "guard:\n  workload:\n    name: x\n"), 0);
    CHECK_STR(c.guard, "{\"workload\":{\"name\":\"x\"}}");
    tml__cli_config_release(&c);
    /* no guard: "" */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "mode: cli\n"), 0);
    CHECK_STR(c.guard, "");
    tml__cli_config_release(&c);
    /* what it cannot read is one line naming it */
    CHECK_EQ_INT(parse(&c, "traceml.yaml", "guard:\n  workload:\n    - a\n"), -1);
    CHECK(strstr(c.err, "traceml.yaml:3") != NULL && strstr(c.err, "guard: lists") != NULL);
    tml__cli_config_release(&c);
}

#define TESTS X(test_guard_block) X(test_yaml_options_and_lines) X(test_bom_is_skipped) X(test_duplicate_keys) \
    X(test_errors_name_file_and_line) X(test_warn_and_crit_on_two_lines)
#include "harness.h"
