// Mints a tokengate api token with Java's own javax.crypto (no library; Java 11 or newer runs it as a script).
//
// Usage: java Mint.java SECRET_FILE USER_ID [KID]
// SECRET_FILE holds the HMAC secret as tokengate's hmac_file reads it (raw bytes, a trailing newline ignored).

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Mint {
    public static void main(String[] args) throws Exception {
        byte[] secret = Files.readAllBytes(Path.of(args[0]));
        if (secret.length > 0 && secret[secret.length - 1] == '\n') {
            secret = Arrays.copyOf(secret, secret.length - 1);
        }
        String userId = args[1];
        String kid = args.length > 2 ? args[2] : null;

        String header = "{\"alg\":\"HS256\",\"typ\":\"JWT\"" + (kid == null ? "" : ",\"kid\":" + json(kid)) + "}";
        String claims = "{\"sub\":" + json(userId) + ",\"iat\":" + (System.currentTimeMillis() / 1000)
                + ",\"api_only\":true}";
        Base64.Encoder base64url = Base64.getUrlEncoder().withoutPadding();
        String signingInput = base64url.encodeToString(header.getBytes(StandardCharsets.UTF_8)) + "."
                + base64url.encodeToString(claims.getBytes(StandardCharsets.UTF_8));
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret, "HmacSHA256"));
        byte[] signature = mac.doFinal(signingInput.getBytes(StandardCharsets.US_ASCII));
        System.out.println(signingInput + "." + base64url.encodeToString(signature));
    }

    /** A JSON string: the standard library has no JSON writer, so the escapes RFC 8259 requires, by hand. */
    static String json(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
