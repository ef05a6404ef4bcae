/* Attach to an existing sandbox from another process.

       ./attach create          creates a sandbox, leaves a note in it, prints
                                the claim name and exits without deleting it
       ./attach use <claim>     attaches to that claim, reads the note, and
                                deletes the sandbox

   The connection (kubectl tunnel by default) is per process; the sandbox
   lives on in the cluster between the two. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>

int main(int argc, char **argv) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb = NULL;
    asb_error err;
    int rc = 1;
    if (argc < 2 || (strcmp(argv[1], "use") == 0 && argc < 3)) {
        fprintf(stderr, "usage: attach create | attach use <claim>\n");
        return 2;
    }
    memset(&desc, 0, sizeof desc);
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    if (strcmp(argv[1], "create") == 0) {
        if (asb_client_create_sandbox(client, "python-sandbox-template", NULL, &sb, &err) ==
                ASB_OK &&
            asb_sandbox_write(sb, "note.txt", "left by the first process\n", 26, &err) == ASB_OK) {
            printf("%s\n", asb_sandbox_claim_name(sb));
            asb_sandbox_close_connection(sb); /* the claim stays */
            rc = 0;
        } else {
            fprintf(stderr, "create: %s\n", err.message);
        }
    } else {
        asb_buf note;
        asb_buf_init(&note, NULL);
        if (asb_client_get_sandbox(client, argv[2], NULL, 0, &sb, &err) == ASB_OK &&
            asb_sandbox_read(sb, "note.txt", &note, &err) == ASB_OK) {
            printf("attached to %s: %s", asb_sandbox_name(sb), note.ptr);
            rc = asb_sandbox_terminate(sb, &err) == ASB_OK ? 0 : 1;
        }
        if (rc) fprintf(stderr, "use: %s\n", err.message);
        asb_buf_free(&note);
    }
    asb_client_free(client);
    return rc;
}
